/* intercept.h - what happens when the program calls curl_easy_perform.
 * Decides ours or real (classify), and runs the loop for ours. */
#ifndef SHIM_INTERCEPT_H
#define SHIM_INTERCEPT_H

#include "real.h"

CURLcode shim_intercept_perform(const struct shim_curl_api *api, CURL *h);

#endif
