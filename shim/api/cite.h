/* cite.h - where the model's text links files of its sandbox.
 *
 * OpenAI's code interpreter links what the code wrote as
 * sandbox:/mnt/data/NAME, usually inside markdown ([label](...) or
 * ![alt](...)), and attaches a container_file_citation whose start and
 * end index span that link. This engine finds those links; the caller
 * decides which names are files it knows. Pure; linear in the text. */
#ifndef SHIM_CITE_H
#define SHIM_CITE_H

#include <stddef.h>

#define SHIM_CITE_NAME_MAX 256

struct shim_cite {
    size_t start, end; /* in characters (Unicode code points), end exclusive */
    char name[SHIM_CITE_NAME_MAX]; /* relative to /mnt/data, percent-decoded */
};

/* Fills out[0..max) with the links in text[0..len), in order; returns how
 * many were found (at most max). Names that are empty, too long, contain
 * a NUL or control character, or a "." or ".." segment are skipped. */
size_t shim_cite_find(const char *text, size_t len, struct shim_cite *out, size_t max);

#endif
