/* offline_cpu.c - the offline model's own CPU time on a request, i.e. the
 * part of `host_bench cpu` under CODESHIM_OFFLINE=1 that is the stand-in
 * upstream's work and not codeshim's: what upstream.c's offline transport
 * does with the body it is sent (parse it, reply, print the reply).
 *
 *   offline_cpu BODYFILE N     prints "<median ms> <p25> <p75>" */
#include "api/offline.h"
#include "base/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

int main(int argc, char **argv)
{
    char *body;
    size_t size;
    int n, i;
    double *t;

    if (argc != 3 || (n = atoi(argv[2])) < 1 || !(body = slurp(argv[1], &size)))
        return 2;
    t = calloc((size_t)n, sizeof(*t));
    if (!t)
        return 2;
    for (i = 0; i < n; i++) {
        double t0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
        cJSON *req = shim_json_parse(body, size);
        cJSON *rep = req ? shim_offline_reply(SHIM_API_RESPONSES, req) : NULL;
        char *text = rep ? cJSON_PrintUnformatted(rep) : NULL;
        if (!text)
            return 1;
        free(text);
        cJSON_Delete(rep);
        cJSON_Delete(req);
        t[i] = clock_ms(CLOCK_THREAD_CPUTIME_ID) - t0;
    }
    qsort(t, (size_t)n, sizeof(*t), cmp);
    printf("%.4f %.4f %.4f\n", t[n / 2], t[n / 4], t[(3 * n) / 4]);
    free(body);
    free(t);
    return 0;
}
