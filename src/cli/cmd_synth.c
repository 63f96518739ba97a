/* cmd_synth.c — placeholder until the synth command lands (being written now). */
#include "cli.h"

int cmd_synth(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("synth: not available in this build yet");
}
