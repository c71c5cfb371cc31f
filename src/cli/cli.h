/* The hetrain command: shared declarations of main.c (parsing) and commands.c. */
#ifndef HET_CLI_H
#define HET_CLI_H

#include <hetrain.h>

/* Exit statuses: 0 success, 1 runtime failure (data, files, training), 2 usage error. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

int cli_train(const het_train_config *c);
int cli_eval(const het_train_config *c);
int cli_info(const het_train_config *c);
int cli_export(const het_train_config *c);
int cli_calibrate(const het_train_config *c);

/* Prints "hetrain: <het_error_msg()>" on stderr (rank 0) and returns CLI_FAIL. */
int cli_fail(void);
/* Agreement of all ranks on a status (het_comm_agree); the status itself on one rank. */
int cli_agree(int status);

#endif
