/* offline_cpu.c - the offline model's own CPU time on a request, i.e. the
 * part of `host_bench cpu` under CODESHIM_OFFLINE=1 that is the stand-in
 * upstream's work and not codeshim's: what upstream.c's offline transport
 * does with the body it is sent (parse it, reply, print the reply).
 *
 *   offline_cpu BODYFILE N     prints "<median ms> <p25> <p75>" */
#include "json.h"
#include "offline.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    FILE *f;
    char *body;
    long size;
    int n, i;
    double *t;

    if (argc != 3 || (n = atoi(argv[2])) < 1 || !(f = fopen(argv[1], "rb")))
        return 2;
    if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
        return 2;
    body = malloc((size_t)size + 1);
    t = calloc((size_t)n, sizeof(*t));
    if (!body || !t || fread(body, 1, (size_t)size, f) != (size_t)size)
        return 2;
    body[size] = '\0';
    fclose(f);
    for (i = 0; i < n; i++) {
        double t0 = cpu_ms();
        cJSON *req = shim_json_parse(body, (size_t)size);
        cJSON *rep = req ? shim_offline_reply(SHIM_API_RESPONSES, req) : NULL;
        char *text = rep ? cJSON_PrintUnformatted(rep) : NULL;
        if (!text)
            return 1;
        free(text);
        cJSON_Delete(rep);
        cJSON_Delete(req);
        t[i] = cpu_ms() - t0;
    }
    qsort(t, (size_t)n, sizeof(*t), cmp);
    printf("%.4f %.4f %.4f\n", t[n / 2], t[n / 4], t[(3 * n) / 4]);
    free(body);
    free(t);
    return 0;
}
