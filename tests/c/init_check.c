/* Prints what tether_init returned and the detailed error, then exits 0:
 * the tests check start-up failures from the outside. */
#include "common.h"

int main(int argc, char **argv) {
    int rc = tether_init(&argc, &argv);
    char msg[TETHER_MAX_ERROR_STRING];
    tether_last_error(msg, sizeof msg);
    printf("rc=%d %s\n", rc, rc == TETHER_SUCCESS ? "" : msg);
    if (rc == TETHER_SUCCESS) CHECK(tether_finalize());
    return 0;
}
