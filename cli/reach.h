/* reach.h - whether LD_PRELOAD can reach a program. The dynamic loader
 * reads LD_PRELOAD only for a dynamically linked program (one naming a
 * program interpreter, PT_INTERP), and ignores it for one it runs in
 * secure mode (setuid or setgid to someone else, file capabilities).
 * The launcher warns about such a program and runs it anyway. */
#ifndef CLI_REACH_H
#define CLI_REACH_H

#include <stddef.h>

enum cli_reach {
    CLI_REACH_OK = 0,   /* reachable, or nothing known against it */
    CLI_REACH_STATIC,   /* an ELF executable without PT_INTERP */
    CLI_REACH_SETUID,
    CLI_REACH_SETGID,
    CLI_REACH_CAPS,     /* file capabilities (security.capability) */
};

/* The file execvp(prog) would run: prog itself when it holds a '/', else
 * the first executable regular file named prog in path_env's directories
 * (NULL: "/usr/bin:/bin"). 0 with it in out, -ENOENT, -ENAMETOOLONG. */
int cli_reach_resolve(const char *prog, const char *path_env, char *out, size_t outsz);
/* Judges the file at path; for a "#!" script, its interpreter (judged
 * gets the file judged either way). Unreadable files and other formats
 * are CLI_REACH_OK: the exec's own error, if any, says the rest. */
enum cli_reach cli_reach_check(const char *path, char *judged, size_t judgedsz);
/* Why, as the end of a sentence naming the file ("is statically linked ..."). */
const char *cli_reach_text(enum cli_reach r);

#endif
