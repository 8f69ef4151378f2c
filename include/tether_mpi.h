/* Tether: joining the universe from an MPI program.
 *
 * Header-only: it is compiled by the application's own MPI (any
 * implementation, any compiler wrapper), so libtether never links MPI.
 * It includes <mpi.h> and tether.h:
 *
 *     mpicc app.c $(pkg-config --cflags --libs tether)
 *
 * Every rank of `comm` calls one of the functions below, after MPI_Init.
 * They ask MPI only for the rank and size of `comm` (no communication) and
 * return TETHER_SUCCESS, the error of tether_init_as, or TETHER_ERR_INIT
 * when MPI cannot tell the rank or size (under MPI_ERRORS_RETURN).
 */

#ifndef TETHER_MPI_H
#define TETHER_MPI_H

#include <mpi.h>

#include "tether.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every rank of `comm` joins the universe as rank r of program `program`,
 * where r is its rank in `comm` and the program's size is the size of
 * `comm`: tether_init_as(program, rank, size). */
static inline int tether_init_mpi(MPI_Comm comm, const char *program)
{
    int rank, size;
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
        MPI_Comm_size(comm, &size) != MPI_SUCCESS) {
        return TETHER_ERR_INIT;
    }
    return tether_init_as(program, rank, size);
}

/* Head mode: only rank 0 of `comm` joins, as rank 0 of a program of one
 * process: tether_init_as(program, 0, 1). The other ranks return
 * TETHER_SUCCESS at once without joining; they must not call any other
 * tether_ function except tether_initialized, which tells them (*flag == 0)
 * that they did not join. Rank 0 relays what it receives to them with MPI
 * (MPI_Bcast and the like). */
static inline int tether_init_mpi_head(MPI_Comm comm, const char *program)
{
    int rank;
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS) {
        return TETHER_ERR_INIT;
    }
    return rank == 0 ? tether_init_as(program, 0, 1) : TETHER_SUCCESS;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TETHER_MPI_H */
