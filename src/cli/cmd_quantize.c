/* cmd_quantize.c — placeholder until the quantize command lands (being written now). */
#include "cli.h"

int cmd_quantize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("quantize: not available in this build yet");
}
