/* check.h - `codeshim --check` (check.c): what isolation this machine
 * gives the code the model writes, found by starting a real sandbox. */
#ifndef CLI_CHECK_H
#define CLI_CHECK_H

/* Prints the report on stdout (with the CODESHIM_* settings of the
 * environment); 0 when code can run isolated, 1 otherwise. */
int cli_check_main(void);

#endif
