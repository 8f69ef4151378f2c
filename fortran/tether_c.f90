! Tether's C API (include/tether.h) as seen from Fortran: the constants
! with the header's values, the status structure, and bind(C) interfaces
! to the C functions. Users `use tether`, which re-exports the constants
! and wraps these interfaces in MPI-style subroutines with a trailing ierr;
! this module is the layer under it.
!
! tests/test_fortran.py checks every integer constant of tether.h against
! this file, so the two cannot drift apart.
module tether_c
  use, intrinsic :: iso_c_binding, only: c_int, c_int64_t, c_char, c_ptr, c_funptr, c_size_t
  implicit none
  private :: c_int, c_int64_t, c_char, c_ptr, c_funptr, c_size_t

  ! Error classes.
  integer, parameter :: TETHER_SUCCESS = 0
  integer, parameter :: TETHER_ERR_ARG = 1
  integer, parameter :: TETHER_ERR_COUNT = 2
  integer, parameter :: TETHER_ERR_RANK = 3
  integer, parameter :: TETHER_ERR_TAG = 4
  integer, parameter :: TETHER_ERR_COMM = 5
  integer, parameter :: TETHER_ERR_TYPE = 6
  integer, parameter :: TETHER_ERR_OP = 7
  integer, parameter :: TETHER_ERR_REQUEST = 8
  integer, parameter :: TETHER_ERR_TRUNCATE = 9
  integer, parameter :: TETHER_ERR_NOT_INITIALIZED = 10
  integer, parameter :: TETHER_ERR_INIT = 11
  integer, parameter :: TETHER_ERR_TIMEOUT = 12
  integer, parameter :: TETHER_ERR_PEER_LOST = 13
  integer, parameter :: TETHER_ERR_PROTOCOL = 14
  integer, parameter :: TETHER_ERR_AUTH = 15
  integer, parameter :: TETHER_ERR_TRANSPORT = 16
  integer, parameter :: TETHER_ERR_UNKNOWN_HINT = 17
  integer, parameter :: TETHER_ERR_HINT_VALUE = 18
  integer, parameter :: TETHER_ERR_RMA_RANGE = 19
  integer, parameter :: TETHER_ERR_FIELD_MISMATCH = 20
  integer, parameter :: TETHER_ERR_NO_MEM = 21
  integer, parameter :: TETHER_ERR_FILE = 22
  integer, parameter :: TETHER_ERR_CANCELLED = 23
  integer, parameter :: TETHER_ERR_INTERNAL = 24

  ! Wildcards, null handles, limits.
  integer, parameter :: TETHER_ANY_SOURCE = -1
  integer, parameter :: TETHER_ANY_TAG = -1
  integer, parameter :: TETHER_TAG_UB = 2147483647
  integer, parameter :: TETHER_UNDEFINED = -32766
  integer, parameter :: TETHER_MAX_PROGRAM_NAME = 65
  integer, parameter :: TETHER_MAX_ERROR_STRING = 1024
  integer, parameter :: TETHER_REQUEST_NULL = 0
  integer, parameter :: TETHER_COMM_UNIVERSE = 1
  integer, parameter :: TETHER_COMM_NULL = 0
  integer, parameter :: TETHER_WIN_NULL = 0

  ! Fields (DESIGN 3.8). Fortran ignores case, so TETHER_FIELD_PUT and
  ! TETHER_FIELD_GET would clash with tether_field_put and tether_field_get:
  ! the modes are TETHER_FIELD_MODE_PUT and TETHER_FIELD_MODE_GET here.
  integer, parameter :: TETHER_DIST_NULL = 0
  integer, parameter :: TETHER_FIELD_NULL = 0
  integer, parameter :: TETHER_DIST_BLOCK = 1
  integer, parameter :: TETHER_DIST_CYCLIC = 2
  integer, parameter :: TETHER_DIST_BLOCK_CYCLIC = 3
  integer, parameter :: TETHER_DIST_NONE = 4
  integer, parameter :: TETHER_ORDER_C = 0
  integer, parameter :: TETHER_ORDER_FORTRAN = 1
  integer, parameter :: TETHER_FIELD_MODE_PUT = 1
  integer, parameter :: TETHER_FIELD_MODE_GET = 2

  ! Datatypes: C's, then Fortran's.
  integer, parameter :: TETHER_BYTE = 1
  integer, parameter :: TETHER_CHAR = 2
  integer, parameter :: TETHER_INT8 = 3
  integer, parameter :: TETHER_INT16 = 4
  integer, parameter :: TETHER_INT32 = 5
  integer, parameter :: TETHER_INT64 = 6
  integer, parameter :: TETHER_UINT8 = 7
  integer, parameter :: TETHER_UINT16 = 8
  integer, parameter :: TETHER_UINT32 = 9
  integer, parameter :: TETHER_UINT64 = 10
  integer, parameter :: TETHER_INT = 11
  integer, parameter :: TETHER_LONG = 12
  integer, parameter :: TETHER_LONG_LONG = 13
  integer, parameter :: TETHER_FLOAT = 14
  integer, parameter :: TETHER_DOUBLE = 15
  integer, parameter :: TETHER_FLOAT_COMPLEX = 16
  integer, parameter :: TETHER_DOUBLE_COMPLEX = 17
  integer, parameter :: TETHER_FLOAT_INT = 18
  integer, parameter :: TETHER_DOUBLE_INT = 19
  integer, parameter :: TETHER_2INT = 20
  integer, parameter :: TETHER_INTEGER = 21
  integer, parameter :: TETHER_REAL = 22
  integer, parameter :: TETHER_DOUBLE_PRECISION = 23
  integer, parameter :: TETHER_COMPLEX = 24
  integer, parameter :: TETHER_LOGICAL = 25
  integer, parameter :: TETHER_2INTEGER = 26
  integer, parameter :: TETHER_2REAL = 27
  integer, parameter :: TETHER_2DOUBLE_PRECISION = 28
  ! Fortran's name for TETHER_CHAR (MPI_CHARACTER); not in tether.h.
  integer, parameter :: TETHER_CHARACTER = TETHER_CHAR

  ! Reduction operations.
  integer, parameter :: TETHER_SUM = 1
  integer, parameter :: TETHER_PROD = 2
  integer, parameter :: TETHER_MIN = 3
  integer, parameter :: TETHER_MAX = 4
  integer, parameter :: TETHER_LAND = 5
  integer, parameter :: TETHER_LOR = 6
  integer, parameter :: TETHER_LXOR = 7
  integer, parameter :: TETHER_BAND = 8
  integer, parameter :: TETHER_BOR = 9
  integer, parameter :: TETHER_BXOR = 10
  integer, parameter :: TETHER_MINLOC = 11
  integer, parameter :: TETHER_MAXLOC = 12
  ! The accumulate family only (DESIGN 3.7; MPI_REPLACE, MPI_NO_OP):
  ! collectives refuse them with TETHER_ERR_OP.
  integer, parameter :: TETHER_REPLACE = 13
  integer, parameter :: TETHER_NO_OP = 14

  ! A Fortran status is `integer :: status(TETHER_STATUS_SIZE)`, laid out as
  ! C's tether_status: status(TETHER_SOURCE), status(TETHER_TAG),
  ! status(TETHER_ERROR), then the message size in bytes (a 64-bit integer
  ! in the last two elements; tether_get_count reads it).
  integer, parameter :: TETHER_STATUS_SIZE = 6
  integer, parameter :: TETHER_SOURCE = 1
  integer, parameter :: TETHER_TAG = 2
  integer, parameter :: TETHER_ERROR = 3
  integer, parameter :: TETHER_STATUS_BYTES = 5

  ! C's tether_status.
  type, bind(C) :: tether_status_c
    integer(c_int) :: source = 0
    integer(c_int) :: tag = 0
    integer(c_int) :: error = 0
    integer(c_int64_t) :: bytes = 0
  end type tether_status_c

  interface
    ! --- start-up and the universe ---
    integer(c_int) function c_init(argc, argv) bind(C, name="tether_init")
      import :: c_int, c_ptr
      type(c_ptr), value :: argc, argv
    end function
    integer(c_int) function c_init_as(program, rank, size) bind(C, name="tether_init_as")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: program(*)
      integer(c_int), value :: rank, size
    end function
    integer(c_int) function c_finalize() bind(C, name="tether_finalize")
      import :: c_int
    end function
    integer(c_int) function c_initialized(flag) bind(C, name="tether_initialized")
      import :: c_int
      integer(c_int), intent(out) :: flag
    end function
    integer(c_int) function c_abort(code) bind(C, name="tether_abort")
      import :: c_int
      integer(c_int), value :: code
    end function
    integer(c_int) function c_universe_rank(rank) bind(C, name="tether_universe_rank")
      import :: c_int
      integer(c_int), intent(out) :: rank
    end function
    integer(c_int) function c_universe_size(size) bind(C, name="tether_universe_size")
      import :: c_int
      integer(c_int), intent(out) :: size
    end function
    integer(c_int) function c_program_count(count) bind(C, name="tether_program_count")
      import :: c_int
      integer(c_int), intent(out) :: count
    end function
    integer(c_int) function c_program_id(id) bind(C, name="tether_program_id")
      import :: c_int
      integer(c_int), intent(out) :: id
    end function
    integer(c_int) function c_program_rank(rank) bind(C, name="tether_program_rank")
      import :: c_int
      integer(c_int), intent(out) :: rank
    end function
    integer(c_int) function c_program_size(id, size) bind(C, name="tether_program_size")
      import :: c_int
      integer(c_int), value :: id
      integer(c_int), intent(out) :: size
    end function
    integer(c_int) function c_program_universe_rank(id, rank, universe_rank) &
        bind(C, name="tether_program_universe_rank")
      import :: c_int
      integer(c_int), value :: id, rank
      integer(c_int), intent(out) :: universe_rank
    end function
    integer(c_int) function c_program_name(id, name, len) bind(C, name="tether_program_name")
      import :: c_int, c_char
      integer(c_int), value :: id, len
      character(kind=c_char), intent(out) :: name(*)
    end function
    integer(c_int) function c_program_find(name, id) bind(C, name="tether_program_find")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), intent(out) :: id
    end function

    ! --- errors and hints ---
    integer(c_int) function c_error_string(code, buf, len) bind(C, name="tether_error_string")
      import :: c_int, c_char
      integer(c_int), value :: code, len
      character(kind=c_char), intent(out) :: buf(*)
    end function
    integer(c_int) function c_last_error(buf, len) bind(C, name="tether_last_error")
      import :: c_int, c_char
      integer(c_int), value :: len
      character(kind=c_char), intent(out) :: buf(*)
    end function
    integer(c_int) function c_hint(key, value) bind(C, name="tether_hint")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: key(*), value(*)
    end function
    integer(c_int) function c_hint_get(key, value, len) bind(C, name="tether_hint_get")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: key(*)
      character(kind=c_char), intent(out) :: value(*)
      integer(c_int), value :: len
    end function

    ! --- communicators ---
    integer(c_int) function c_comm_create(nprograms, programs, comm) bind(C, name="tether_comm_create")
      import :: c_int
      integer(c_int), value :: nprograms
      integer(c_int), intent(in) :: programs(*)
      integer(c_int), intent(out) :: comm
    end function
    integer(c_int) function c_comm_create_ranks(n, ranks, comm) bind(C, name="tether_comm_create_ranks")
      import :: c_int
      integer(c_int), value :: n
      integer(c_int), intent(in) :: ranks(*)
      integer(c_int), intent(out) :: comm
    end function
    integer(c_int) function c_comm_rank(comm, rank) bind(C, name="tether_comm_rank")
      import :: c_int
      integer(c_int), value :: comm
      integer(c_int), intent(out) :: rank
    end function
    integer(c_int) function c_comm_size(comm, size) bind(C, name="tether_comm_size")
      import :: c_int
      integer(c_int), value :: comm
      integer(c_int), intent(out) :: size
    end function
    integer(c_int) function c_comm_universe_rank(comm, rank, universe_rank) &
        bind(C, name="tether_comm_universe_rank")
      import :: c_int
      integer(c_int), value :: comm, rank
      integer(c_int), intent(out) :: universe_rank
    end function
    integer(c_int) function c_comm_free(comm) bind(C, name="tether_comm_free")
      import :: c_int
      integer(c_int), intent(inout) :: comm
    end function

    ! --- point to point ---
    integer(c_int) function c_isend(buf, count, datatype, dest, tag, comm, req) bind(C, name="tether_isend")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: buf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, dest, tag, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_irecv(buf, count, datatype, source, tag, comm, req) bind(C, name="tether_irecv")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: buf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, source, tag, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_send(buf, count, datatype, dest, tag, comm) bind(C, name="tether_send")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: buf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, dest, tag, comm
    end function
    integer(c_int) function c_recv(buf, count, datatype, source, tag, comm, status) bind(C, name="tether_recv")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: buf, status
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, source, tag, comm
    end function
    integer(c_int) function c_wait(req, status) bind(C, name="tether_wait")
      import :: c_int, c_ptr
      integer(c_int), intent(inout) :: req
      type(c_ptr), value :: status
    end function
    integer(c_int) function c_waitall(n, reqs, statuses) bind(C, name="tether_waitall")
      import :: c_int, c_ptr
      integer(c_int), value :: n
      integer(c_int), intent(inout) :: reqs(*)
      type(c_ptr), value :: statuses
    end function
    integer(c_int) function c_waitany(n, reqs, index, status) bind(C, name="tether_waitany")
      import :: c_int, c_ptr
      integer(c_int), value :: n
      integer(c_int), intent(inout) :: reqs(*)
      integer(c_int), intent(out) :: index
      type(c_ptr), value :: status
    end function
    integer(c_int) function c_test(req, flag, status) bind(C, name="tether_test")
      import :: c_int, c_ptr
      integer(c_int), intent(inout) :: req
      integer(c_int), intent(out) :: flag
      type(c_ptr), value :: status
    end function
    integer(c_int) function c_testall(n, reqs, flag, statuses) bind(C, name="tether_testall")
      import :: c_int, c_ptr
      integer(c_int), value :: n
      integer(c_int), intent(inout) :: reqs(*)
      integer(c_int), intent(out) :: flag
      type(c_ptr), value :: statuses
    end function
    integer(c_int) function c_probe(source, tag, comm, status) bind(C, name="tether_probe")
      import :: c_int, c_ptr
      integer(c_int), value :: source, tag, comm
      type(c_ptr), value :: status
    end function
    integer(c_int) function c_iprobe(source, tag, comm, flag, status) bind(C, name="tether_iprobe")
      import :: c_int, c_ptr
      integer(c_int), value :: source, tag, comm
      integer(c_int), intent(out) :: flag
      type(c_ptr), value :: status
    end function
    integer(c_int) function c_cancel(req) bind(C, name="tether_cancel")
      import :: c_int
      integer(c_int), intent(inout) :: req
    end function
    integer(c_int) function c_get_count(status, datatype, count) bind(C, name="tether_get_count")
      import :: c_int, c_int64_t, tether_status_c
      type(tether_status_c), intent(in) :: status
      integer(c_int), value :: datatype
      integer(c_int64_t), intent(out) :: count
    end function
    integer(c_int) function c_type_size(datatype, size) bind(C, name="tether_type_size")
      import :: c_int
      integer(c_int), value :: datatype
      integer(c_int), intent(out) :: size
    end function
    integer(c_int) function c_progress() bind(C, name="tether_progress")
      import :: c_int
    end function

    ! --- collectives: the blocking form of each; `req` present in the
    ! non-blocking one (a C NULL request is not allowed, so the two are
    ! separate functions) ---
    integer(c_int) function c_barrier(comm) bind(C, name="tether_barrier")
      import :: c_int
      integer(c_int), value :: comm
    end function
    integer(c_int) function c_ibarrier(comm, req) bind(C, name="tether_ibarrier")
      import :: c_int
      integer(c_int), value :: comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_bcast(buf, count, datatype, root, comm) bind(C, name="tether_bcast")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: buf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, root, comm
    end function
    integer(c_int) function c_ibcast(buf, count, datatype, root, comm, req) bind(C, name="tether_ibcast")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: buf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, root, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_reduce(sendbuf, recvbuf, count, datatype, op, root, comm) &
        bind(C, name="tether_reduce")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sendbuf, recvbuf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, op, root, comm
    end function
    integer(c_int) function c_ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, req) &
        bind(C, name="tether_ireduce")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sendbuf, recvbuf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, op, root, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_allreduce(sendbuf, recvbuf, count, datatype, op, comm) &
        bind(C, name="tether_allreduce")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sendbuf, recvbuf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, op, comm
    end function
    integer(c_int) function c_iallreduce(sendbuf, recvbuf, count, datatype, op, comm, req) &
        bind(C, name="tether_iallreduce")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sendbuf, recvbuf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, op, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_reduce_scatter_block(sendbuf, recvbuf, count, datatype, op, comm) &
        bind(C, name="tether_reduce_scatter_block")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sendbuf, recvbuf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, op, comm
    end function
    integer(c_int) function c_ireduce_scatter_block(sendbuf, recvbuf, count, datatype, op, comm, req) &
        bind(C, name="tether_ireduce_scatter_block")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sendbuf, recvbuf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, op, comm
      integer(c_int), intent(out) :: req
    end function

    ! gather, scatter, allgather, alltoall: (sendbuf, sendcount, sendtype,
    ! recvbuf, recvcount, recvtype, [root,] comm [, req]).
    integer(c_int) function c_gather(sb, sc, st, rb, rc, rt, root, comm) bind(C, name="tether_gather")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc, rc
      integer(c_int), value :: st, rt, root, comm
    end function
    integer(c_int) function c_igather(sb, sc, st, rb, rc, rt, root, comm, req) bind(C, name="tether_igather")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc, rc
      integer(c_int), value :: st, rt, root, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_scatter(sb, sc, st, rb, rc, rt, root, comm) bind(C, name="tether_scatter")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc, rc
      integer(c_int), value :: st, rt, root, comm
    end function
    integer(c_int) function c_iscatter(sb, sc, st, rb, rc, rt, root, comm, req) bind(C, name="tether_iscatter")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc, rc
      integer(c_int), value :: st, rt, root, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_allgather(sb, sc, st, rb, rc, rt, comm) bind(C, name="tether_allgather")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc, rc
      integer(c_int), value :: st, rt, comm
    end function
    integer(c_int) function c_iallgather(sb, sc, st, rb, rc, rt, comm, req) bind(C, name="tether_iallgather")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc, rc
      integer(c_int), value :: st, rt, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_alltoall(sb, sc, st, rb, rc, rt, comm) bind(C, name="tether_alltoall")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc, rc
      integer(c_int), value :: st, rt, comm
    end function
    integer(c_int) function c_ialltoall(sb, sc, st, rb, rc, rt, comm, req) bind(C, name="tether_ialltoall")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc, rc
      integer(c_int), value :: st, rt, comm
      integer(c_int), intent(out) :: req
    end function

    ! The v-collectives: count and displacement arrays are default integers.
    integer(c_int) function c_gatherv(sb, sc, st, rb, rcounts, displs, rt, root, comm) &
        bind(C, name="tether_gatherv")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc
      integer(c_int), intent(in) :: rcounts(*), displs(*)
      integer(c_int), value :: st, rt, root, comm
    end function
    integer(c_int) function c_igatherv(sb, sc, st, rb, rcounts, displs, rt, root, comm, req) &
        bind(C, name="tether_igatherv")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc
      integer(c_int), intent(in) :: rcounts(*), displs(*)
      integer(c_int), value :: st, rt, root, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_scatterv(sb, scounts, displs, st, rb, rc, rt, root, comm) &
        bind(C, name="tether_scatterv")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int), intent(in) :: scounts(*), displs(*)
      integer(c_int64_t), value :: rc
      integer(c_int), value :: st, rt, root, comm
    end function
    integer(c_int) function c_iscatterv(sb, scounts, displs, st, rb, rc, rt, root, comm, req) &
        bind(C, name="tether_iscatterv")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int), intent(in) :: scounts(*), displs(*)
      integer(c_int64_t), value :: rc
      integer(c_int), value :: st, rt, root, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_allgatherv(sb, sc, st, rb, rcounts, displs, rt, comm) &
        bind(C, name="tether_allgatherv")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc
      integer(c_int), intent(in) :: rcounts(*), displs(*)
      integer(c_int), value :: st, rt, comm
    end function
    integer(c_int) function c_iallgatherv(sb, sc, st, rb, rcounts, displs, rt, comm, req) &
        bind(C, name="tether_iallgatherv")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int64_t), value :: sc
      integer(c_int), intent(in) :: rcounts(*), displs(*)
      integer(c_int), value :: st, rt, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_alltoallv(sb, scounts, sdispls, st, rb, rcounts, rdispls, rt, comm) &
        bind(C, name="tether_alltoallv")
      import :: c_int, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int), intent(in) :: scounts(*), sdispls(*), rcounts(*), rdispls(*)
      integer(c_int), value :: st, rt, comm
    end function
    integer(c_int) function c_ialltoallv(sb, scounts, sdispls, st, rb, rcounts, rdispls, rt, comm, req) &
        bind(C, name="tether_ialltoallv")
      import :: c_int, c_ptr
      type(c_ptr), value :: sb, rb
      integer(c_int), intent(in) :: scounts(*), sdispls(*), rcounts(*), rdispls(*)
      integer(c_int), value :: st, rt, comm
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_dist_create(ndims, shape, grid, kinds, blocks, order, dist) &
        bind(C, name="tether_dist_create")
      import :: c_int, c_int64_t, c_ptr
      integer(c_int), value :: ndims, order
      integer(c_int64_t), intent(in) :: shape(*)
      integer(c_int), intent(in) :: grid(*), kinds(*)
      type(c_ptr), value :: blocks
      integer(c_int), intent(out) :: dist
    end function
    integer(c_int) function c_dist_create_boxes(ndims, shape, nboxes, starts, counts, order, dist) &
        bind(C, name="tether_dist_create_boxes")
      import :: c_int, c_int64_t
      integer(c_int), value :: ndims, nboxes, order
      integer(c_int64_t), intent(in) :: shape(*), starts(*), counts(*)
      integer(c_int), intent(out) :: dist
    end function
    integer(c_int) function c_dist_local_shape(dist, shape) bind(C, name="tether_dist_local_shape")
      import :: c_int, c_int64_t
      integer(c_int), value :: dist
      integer(c_int64_t), intent(out) :: shape(*)
    end function
    integer(c_int) function c_dist_free(dist) bind(C, name="tether_dist_free")
      import :: c_int
      integer(c_int), intent(inout) :: dist
    end function
    integer(c_int) function c_field_create(name, datatype, dist, peers, mode, field) &
        bind(C, name="tether_field_create")
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*), peers(*)
      integer(c_int), value :: datatype, dist, mode
      integer(c_int), intent(out) :: field
    end function
    integer(c_int) function c_field_put(field, step, local) bind(C, name="tether_field_put")
      import :: c_int, c_int64_t, c_ptr
      integer(c_int), value :: field
      integer(c_int64_t), value :: step
      type(c_ptr), value :: local
    end function
    integer(c_int) function c_field_iput(field, step, local, req) bind(C, name="tether_field_iput")
      import :: c_int, c_int64_t, c_ptr
      integer(c_int), value :: field
      integer(c_int64_t), value :: step
      type(c_ptr), value :: local
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_field_get(field, step, local) bind(C, name="tether_field_get")
      import :: c_int, c_int64_t, c_ptr
      integer(c_int), value :: field
      integer(c_int64_t), value :: step
      type(c_ptr), value :: local
    end function
    integer(c_int) function c_field_iget(field, step, local, req) bind(C, name="tether_field_iget")
      import :: c_int, c_int64_t, c_ptr
      integer(c_int), value :: field
      integer(c_int64_t), value :: step
      type(c_ptr), value :: local
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_field_free(field) bind(C, name="tether_field_free")
      import :: c_int
      integer(c_int), intent(inout) :: field
    end function
    ! --- one-sided (DESIGN 3.7); offsets are in bytes ---
    integer(c_int) function c_win_create(base, bytes, comm, win) bind(C, name="tether_win_create")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: base
      integer(c_int64_t), value :: bytes
      integer(c_int), value :: comm
      integer(c_int), intent(out) :: win
    end function
    integer(c_int) function c_win_free(win) bind(C, name="tether_win_free")
      import :: c_int
      integer(c_int), intent(inout) :: win
    end function
    integer(c_int) function c_put(origin, count, datatype, target, offset, win) bind(C, name="tether_put")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: origin
      integer(c_int64_t), value :: count, offset
      integer(c_int), value :: datatype, target, win
    end function
    integer(c_int) function c_get(origin, count, datatype, target, offset, win) bind(C, name="tether_get")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: origin
      integer(c_int64_t), value :: count, offset
      integer(c_int), value :: datatype, target, win
    end function
    integer(c_int) function c_rput(origin, count, datatype, target, offset, win, req) bind(C, name="tether_rput")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: origin
      integer(c_int64_t), value :: count, offset
      integer(c_int), value :: datatype, target, win
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_rget(origin, count, datatype, target, offset, win, req) bind(C, name="tether_rget")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: origin
      integer(c_int64_t), value :: count, offset
      integer(c_int), value :: datatype, target, win
      integer(c_int), intent(out) :: req
    end function
    integer(c_int) function c_accumulate(origin, count, datatype, target, offset, op, win) &
        bind(C, name="tether_accumulate")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: origin
      integer(c_int64_t), value :: count, offset
      integer(c_int), value :: datatype, target, op, win
    end function
    integer(c_int) function c_fetch_and_op(origin, result, datatype, target, offset, op, win) &
        bind(C, name="tether_fetch_and_op")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: origin, result
      integer(c_int64_t), value :: offset
      integer(c_int), value :: datatype, target, op, win
    end function
    integer(c_int) function c_compare_and_swap(origin, compare, result, datatype, target, offset, win) &
        bind(C, name="tether_compare_and_swap")
      import :: c_int, c_int64_t, c_ptr
      type(c_ptr), value :: origin, compare, result
      integer(c_int64_t), value :: offset
      integer(c_int), value :: datatype, target, win
    end function
    integer(c_int) function c_win_flush(target, win) bind(C, name="tether_win_flush")
      import :: c_int
      integer(c_int), value :: target, win
    end function
    integer(c_int) function c_win_flush_all(win) bind(C, name="tether_win_flush_all")
      import :: c_int
      integer(c_int), value :: win
    end function
    integer(c_int) function c_win_fence(win) bind(C, name="tether_win_fence")
      import :: c_int
      integer(c_int), value :: win
    end function
    ! --- active messages (DESIGN 3.7); lengths are in bytes ---
    integer(c_int) function c_am_register(id, handler, ctx) bind(C, name="tether_am_register")
      import :: c_int, c_funptr, c_ptr
      integer(c_int), value :: id
      type(c_funptr), value :: handler
      type(c_ptr), value :: ctx
    end function
    integer(c_int) function c_am_send(dest, id, header, header_len, payload, payload_len, comm, req) &
        bind(C, name="tether_am_send")
      import :: c_int, c_size_t, c_ptr
      integer(c_int), value :: dest, id
      type(c_ptr), value :: header, payload
      integer(c_size_t), value :: header_len, payload_len
      integer(c_int), value :: comm
      integer(c_int), intent(out) :: req
    end function
  end interface
end module tether_c
