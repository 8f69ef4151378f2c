/* Start-up at scale: init, one barrier, finalize; nothing else.
 * benches/hints/startup.py times `tether run -n N` of it. */
#include <stdio.h>

#include "tether.h"

int main(int argc, char **argv) {
    if (tether_init(&argc, &argv) != TETHER_SUCCESS) return 1;
    if (tether_barrier(TETHER_COMM_UNIVERSE) != TETHER_SUCCESS) return 2;
    return tether_finalize() == TETHER_SUCCESS ? 0 : 3;
}
