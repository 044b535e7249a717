/* settings_dump.c - prints the library's table of settings (settings.h),
 * one row a line, tab-separated: variable, kind, default, range, launcher
 * option, its placeholder, the range's ends as numbers, its key in a
 * CODESHIM_CONFIG sandbox, help. tests/tools/check_settings_docs.py reads
 * it to check the README's configuration table and the man page's
 * ENVIRONMENT section against the table (`make docs-check`). */
#include "system/settings.h"

#include <stdio.h>

int main(void)
{
    static const char *const kinds[] = {"bool", "num",  "size",   "word", "level",
                                        "str",  "path", "secret", "dir"};
    size_t i;

    for (i = 0; i < shim_nsettings; i++) {
        const struct shim_setting *s = &shim_settings[i];
        char def[256], range[256];

        shim_setting_describe(s, def, range, sizeof(def));
        printf("%s\t%s\t%s\t%s\t%s\t%s\t%lld\t%lld\t%s\t%s\n", s->var, kinds[s->kind], def,
               range, s->option ? s->option : "", s->arg ? s->arg : "", s->lo, s->hi,
               s->file_key ? s->file_key : "", s->help);
    }
    return 0;
}
