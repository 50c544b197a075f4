/*
 * dirlist.h: the files of one directory whose names have a given prefix and suffix,
 * sorted by name. Used instead of glob() wherever the directory comes from a user path
 * (-o, -init-from): glob would treat `[`, `*` or `?` in that path as a pattern and
 * match another run's files. Only -i/-j are globbed, on purpose.
 */
#ifndef LLMC_DIRLIST_H
#define LLMC_DIRLIST_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dirlist_cmp(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

// Fills *paths with "dir/name" for each match (caller frees each and the array) and
// returns the count; 0 when none match or the directory cannot be read; -1 out of memory.
static int dir_list_files(const char* dir, const char* prefix, const char* suffix, char*** paths) {
    *paths = NULL;
    DIR* d = opendir(dir);
    if (d == NULL) return 0;
    int n = 0, cap = 0;
    size_t lp = strlen(prefix), ls = strlen(suffix);
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < lp + ls || strncmp(e->d_name, prefix, lp) != 0 || strcmp(e->d_name + len - ls, suffix) != 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char** grown = (char**)realloc(*paths, sizeof(char*) * cap);
            if (grown == NULL) {
                closedir(d);
                return -1;
            }
            *paths = grown;
        }
        size_t need = strlen(dir) + 1 + len + 1;
        (*paths)[n] = (char*)malloc(need);
        if ((*paths)[n] == NULL) {
            closedir(d);
            return -1;
        }
        snprintf((*paths)[n], need, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n > 1) qsort(*paths, n, sizeof(char*), dirlist_cmp);
    return n;
}

#endif // LLMC_DIRLIST_H
