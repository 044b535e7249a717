/* sessions.h - `codeshim sessions`: what this user's session hosts and
 * sessions are (identity prefix, never a key; session and container id;
 * idle time; idle limit left; memory), and `codeshim sessions stop
 * ID|--all` to end them. It reads the runtime directory of the current
 * environment (CODESHIM_RUNTIME_DIR, else the default, store.h). */
#ifndef CLI_SESSIONS_H
#define CLI_SESSIONS_H

/* The `sessions` subcommand: argv[0] is "sessions". The exit status. */
int cli_sessions_main(int argc, char **argv);

#endif
