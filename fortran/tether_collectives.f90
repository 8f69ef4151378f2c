! Collectives (DESIGN 3.5) as Fortran subroutines, blocking and
! non-blocking, in MPI's argument order with a trailing `ierr`.
!
! Buffers follow tether_p2p's rules (any type, kind and rank; contiguous);
! TETHER_IN_PLACE stands where MPI allows MPI_IN_PLACE. Scalar counts are
! default `integer` or `integer(8)` (both counts of a call of one kind);
! the count and displacement arrays of the v-collectives are default
! integers, as in MPI. The non-blocking forms complete through
! tether_wait/tether_test and friends.
module tether_collectives
  use, intrinsic :: iso_c_binding, only: c_ptr, c_int
  use, intrinsic :: iso_fortran_env, only: int32, int64
  use tether_c
  use tether_support, only: collective_address
  implicit none
  private
  public :: tether_barrier, tether_ibarrier, tether_bcast, tether_ibcast
  public :: tether_reduce, tether_ireduce, tether_allreduce, tether_iallreduce
  public :: tether_reduce_scatter_block, tether_ireduce_scatter_block
  public :: tether_gather, tether_igather, tether_scatter, tether_iscatter
  public :: tether_allgather, tether_iallgather, tether_alltoall, tether_ialltoall
  public :: tether_gatherv, tether_igatherv, tether_scatterv, tether_iscatterv
  public :: tether_allgatherv, tether_iallgatherv, tether_alltoallv, tether_ialltoallv

  interface tether_bcast
    module procedure bcast_i4, bcast_i8
  end interface
  interface tether_ibcast
    module procedure ibcast_i4, ibcast_i8
  end interface
  interface tether_reduce
    module procedure reduce_i4, reduce_i8
  end interface
  interface tether_ireduce
    module procedure ireduce_i4, ireduce_i8
  end interface
  interface tether_allreduce
    module procedure allreduce_i4, allreduce_i8
  end interface
  interface tether_iallreduce
    module procedure iallreduce_i4, iallreduce_i8
  end interface
  interface tether_reduce_scatter_block
    module procedure reduce_scatter_block_i4, reduce_scatter_block_i8
  end interface
  interface tether_ireduce_scatter_block
    module procedure ireduce_scatter_block_i4, ireduce_scatter_block_i8
  end interface
  interface tether_gather
    module procedure gather_i4, gather_i8
  end interface
  interface tether_igather
    module procedure igather_i4, igather_i8
  end interface
  interface tether_scatter
    module procedure scatter_i4, scatter_i8
  end interface
  interface tether_iscatter
    module procedure iscatter_i4, iscatter_i8
  end interface
  interface tether_allgather
    module procedure allgather_i4, allgather_i8
  end interface
  interface tether_iallgather
    module procedure iallgather_i4, iallgather_i8
  end interface
  interface tether_alltoall
    module procedure alltoall_i4, alltoall_i8
  end interface
  interface tether_ialltoall
    module procedure ialltoall_i4, ialltoall_i8
  end interface
  interface tether_gatherv
    module procedure gatherv_i4, gatherv_i8
  end interface
  interface tether_igatherv
    module procedure igatherv_i4, igatherv_i8
  end interface
  interface tether_scatterv
    module procedure scatterv_i4, scatterv_i8
  end interface
  interface tether_iscatterv
    module procedure iscatterv_i4, iscatterv_i8
  end interface
  interface tether_allgatherv
    module procedure allgatherv_i4, allgatherv_i8
  end interface
  interface tether_iallgatherv
    module procedure iallgatherv_i4, iallgatherv_i8
  end interface

contains

  subroutine tether_barrier(comm, ierr)
    integer, intent(in) :: comm
    integer, intent(out) :: ierr
    ierr = c_barrier(comm)
  end subroutine tether_barrier

  subroutine tether_ibarrier(comm, req, ierr)
    integer, intent(in) :: comm
    integer, intent(out) :: req, ierr
    integer(c_int) :: r
    ierr = c_ibarrier(comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine tether_ibarrier

  ! The C addresses of a send and a receive buffer (TETHER_IN_PLACE mapped).
  subroutine addresses(sendbuf, recvbuf, sp, rp, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf, recvbuf
    type(c_ptr), intent(out) :: sp, rp
    integer, intent(out) :: ierr
    call collective_address(sendbuf, sp, ierr)
    if (ierr == TETHER_SUCCESS) call collective_address(recvbuf, rp, ierr)
  end subroutine addresses

  ! --- bcast ---
  subroutine bcast_i8(buf, count, datatype, root, comm, ierr)
    type(*), dimension(..), target, intent(inout) :: buf
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, root, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    call collective_address(buf, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_bcast(p, count, datatype, root, comm)
  end subroutine bcast_i8

  subroutine bcast_i4(buf, count, datatype, root, comm, ierr)
    type(*), dimension(..), target, intent(inout) :: buf
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, root, comm
    integer, intent(out) :: ierr
    call bcast_i8(buf, int(count, int64), datatype, root, comm, ierr)
  end subroutine bcast_i4

  subroutine ibcast_i8(buf, count, datatype, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: buf
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, root, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: p
    integer(c_int) :: r
    call collective_address(buf, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_ibcast(p, count, datatype, root, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine ibcast_i8

  subroutine ibcast_i4(buf, count, datatype, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: buf
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, root, comm
    integer, intent(out) :: req, ierr
    call ibcast_i8(buf, int(count, int64), datatype, root, comm, req, ierr)
  end subroutine ibcast_i4

  ! --- reduce, allreduce, reduce_scatter_block ---
  subroutine reduce_i8(sendbuf, recvbuf, count, datatype, op, root, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, op, root, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: sp, rp
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_reduce(sp, rp, count, datatype, op, root, comm)
  end subroutine reduce_i8

  subroutine reduce_i4(sendbuf, recvbuf, count, datatype, op, root, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, op, root, comm
    integer, intent(out) :: ierr
    call reduce_i8(sendbuf, recvbuf, int(count, int64), datatype, op, root, comm, ierr)
  end subroutine reduce_i4

  subroutine ireduce_i8(sendbuf, recvbuf, count, datatype, op, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, op, root, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: sp, rp
    integer(c_int) :: r
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_ireduce(sp, rp, count, datatype, op, root, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine ireduce_i8

  subroutine ireduce_i4(sendbuf, recvbuf, count, datatype, op, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, op, root, comm
    integer, intent(out) :: req, ierr
    call ireduce_i8(sendbuf, recvbuf, int(count, int64), datatype, op, root, comm, req, ierr)
  end subroutine ireduce_i4

  subroutine allreduce_i8(sendbuf, recvbuf, count, datatype, op, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, op, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: sp, rp
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_allreduce(sp, rp, count, datatype, op, comm)
  end subroutine allreduce_i8

  subroutine allreduce_i4(sendbuf, recvbuf, count, datatype, op, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, op, comm
    integer, intent(out) :: ierr
    call allreduce_i8(sendbuf, recvbuf, int(count, int64), datatype, op, comm, ierr)
  end subroutine allreduce_i4

  subroutine iallreduce_i8(sendbuf, recvbuf, count, datatype, op, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, op, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: sp, rp
    integer(c_int) :: r
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_iallreduce(sp, rp, count, datatype, op, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine iallreduce_i8

  subroutine iallreduce_i4(sendbuf, recvbuf, count, datatype, op, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, op, comm
    integer, intent(out) :: req, ierr
    call iallreduce_i8(sendbuf, recvbuf, int(count, int64), datatype, op, comm, req, ierr)
  end subroutine iallreduce_i4

  subroutine reduce_scatter_block_i8(sendbuf, recvbuf, recvcount, datatype, op, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int64), intent(in) :: recvcount
    integer, intent(in) :: datatype, op, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: sp, rp
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_reduce_scatter_block(sp, rp, recvcount, datatype, op, comm)
  end subroutine reduce_scatter_block_i8

  subroutine reduce_scatter_block_i4(sendbuf, recvbuf, recvcount, datatype, op, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int32), intent(in) :: recvcount
    integer, intent(in) :: datatype, op, comm
    integer, intent(out) :: ierr
    call reduce_scatter_block_i8(sendbuf, recvbuf, int(recvcount, int64), datatype, op, comm, ierr)
  end subroutine reduce_scatter_block_i4

  subroutine ireduce_scatter_block_i8(sendbuf, recvbuf, recvcount, datatype, op, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int64), intent(in) :: recvcount
    integer, intent(in) :: datatype, op, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: sp, rp
    integer(c_int) :: r
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_ireduce_scatter_block(sp, rp, recvcount, datatype, op, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine ireduce_scatter_block_i8

  subroutine ireduce_scatter_block_i4(sendbuf, recvbuf, recvcount, datatype, op, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int32), intent(in) :: recvcount
    integer, intent(in) :: datatype, op, comm
    integer, intent(out) :: req, ierr
    call ireduce_scatter_block_i8(sendbuf, recvbuf, int(recvcount, int64), datatype, op, comm, req, ierr)
  end subroutine ireduce_scatter_block_i4

  ! --- gather, scatter (rooted), allgather, alltoall ---
  subroutine gather_i8(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: sp, rp
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_gather(sp, sendcount, sendtype, rp, recvcount, recvtype, root, comm)
  end subroutine gather_i8

  subroutine gather_i4(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: ierr
    call gather_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, int(recvcount, int64), recvtype, &
                   root, comm, ierr)
  end subroutine gather_i4

  subroutine igather_i8(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: sp, rp
    integer(c_int) :: r
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_igather(sp, sendcount, sendtype, rp, recvcount, recvtype, root, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine igather_i8

  subroutine igather_i4(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: req, ierr
    call igather_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, int(recvcount, int64), recvtype, &
                    root, comm, req, ierr)
  end subroutine igather_i4

  subroutine scatter_i8(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: sp, rp
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_scatter(sp, sendcount, sendtype, rp, recvcount, recvtype, root, comm)
  end subroutine scatter_i8

  subroutine scatter_i4(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: ierr
    call scatter_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, int(recvcount, int64), recvtype, &
                    root, comm, ierr)
  end subroutine scatter_i4

  subroutine iscatter_i8(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: sp, rp
    integer(c_int) :: r
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_iscatter(sp, sendcount, sendtype, rp, recvcount, recvtype, root, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine iscatter_i8

  subroutine iscatter_i4(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: req, ierr
    call iscatter_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, int(recvcount, int64), recvtype, &
                     root, comm, req, ierr)
  end subroutine iscatter_i4

  subroutine allgather_i8(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: sp, rp
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_allgather(sp, sendcount, sendtype, rp, recvcount, recvtype, comm)
  end subroutine allgather_i8

  subroutine allgather_i4(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: ierr
    call allgather_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, int(recvcount, int64), recvtype, &
                      comm, ierr)
  end subroutine allgather_i4

  subroutine iallgather_i8(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: sp, rp
    integer(c_int) :: r
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_iallgather(sp, sendcount, sendtype, rp, recvcount, recvtype, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine iallgather_i8

  subroutine iallgather_i4(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: req, ierr
    call iallgather_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, int(recvcount, int64), recvtype, &
                       comm, req, ierr)
  end subroutine iallgather_i4

  subroutine alltoall_i8(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: sp, rp
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_alltoall(sp, sendcount, sendtype, rp, recvcount, recvtype, comm)
  end subroutine alltoall_i8

  subroutine alltoall_i4(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: ierr
    call alltoall_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, int(recvcount, int64), recvtype, &
                     comm, ierr)
  end subroutine alltoall_i4

  subroutine ialltoall_i8(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: sp, rp
    integer(c_int) :: r
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_ialltoall(sp, sendcount, sendtype, rp, recvcount, recvtype, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine ialltoall_i8

  subroutine ialltoall_i4(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount, recvcount
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: req, ierr
    call ialltoall_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, int(recvcount, int64), recvtype, &
                      comm, req, ierr)
  end subroutine ialltoall_i4

  ! --- the v-collectives; displacements are in elements, 0-based as in MPI ---
  subroutine gatherv_i8(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount
    integer, intent(in) :: recvcounts(*), displs(*)
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: sp, rp
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_gatherv(sp, sendcount, sendtype, rp, recvcounts, displs, recvtype, root, comm)
  end subroutine gatherv_i8

  subroutine gatherv_i4(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount
    integer, intent(in) :: recvcounts(*), displs(*)
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: ierr
    call gatherv_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, ierr)
  end subroutine gatherv_i4

  subroutine igatherv_i8(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount
    integer, intent(in) :: recvcounts(*), displs(*)
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: sp, rp
    integer(c_int) :: r
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) &
      ierr = c_igatherv(sp, sendcount, sendtype, rp, recvcounts, displs, recvtype, root, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine igatherv_i8

  subroutine igatherv_i4(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount
    integer, intent(in) :: recvcounts(*), displs(*)
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: req, ierr
    call igatherv_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, recvcounts, displs, recvtype, &
                     root, comm, req, ierr)
  end subroutine igatherv_i4

  subroutine scatterv_i8(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer, intent(in) :: sendcounts(*), displs(*)
    integer(int64), intent(in) :: recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: sp, rp
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_scatterv(sp, sendcounts, displs, sendtype, rp, recvcount, recvtype, root, comm)
  end subroutine scatterv_i8

  subroutine scatterv_i4(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer, intent(in) :: sendcounts(*), displs(*)
    integer(int32), intent(in) :: recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: ierr
    call scatterv_i8(sendbuf, sendcounts, displs, sendtype, recvbuf, int(recvcount, int64), recvtype, root, comm, ierr)
  end subroutine scatterv_i4

  subroutine iscatterv_i8(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer, intent(in) :: sendcounts(*), displs(*)
    integer(int64), intent(in) :: recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: sp, rp
    integer(c_int) :: r
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) &
      ierr = c_iscatterv(sp, sendcounts, displs, sendtype, rp, recvcount, recvtype, root, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine iscatterv_i8

  subroutine iscatterv_i4(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer, intent(in) :: sendcounts(*), displs(*)
    integer(int32), intent(in) :: recvcount
    integer, intent(in) :: sendtype, recvtype, root, comm
    integer, intent(out) :: req, ierr
    call iscatterv_i8(sendbuf, sendcounts, displs, sendtype, recvbuf, int(recvcount, int64), recvtype, &
                      root, comm, req, ierr)
  end subroutine iscatterv_i4

  subroutine allgatherv_i8(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount
    integer, intent(in) :: recvcounts(*), displs(*)
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: sp, rp
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_allgatherv(sp, sendcount, sendtype, rp, recvcounts, displs, recvtype, comm)
  end subroutine allgatherv_i8

  subroutine allgatherv_i4(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount
    integer, intent(in) :: recvcounts(*), displs(*)
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: ierr
    call allgatherv_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, recvcounts, displs, recvtype, comm, ierr)
  end subroutine allgatherv_i4

  subroutine iallgatherv_i8(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int64), intent(in) :: sendcount
    integer, intent(in) :: recvcounts(*), displs(*)
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: sp, rp
    integer(c_int) :: r
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) &
      ierr = c_iallgatherv(sp, sendcount, sendtype, rp, recvcounts, displs, recvtype, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine iallgatherv_i8

  subroutine iallgatherv_i4(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer(int32), intent(in) :: sendcount
    integer, intent(in) :: recvcounts(*), displs(*)
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: req, ierr
    call iallgatherv_i8(sendbuf, int(sendcount, int64), sendtype, recvbuf, recvcounts, displs, recvtype, &
                        comm, req, ierr)
  end subroutine iallgatherv_i4

  subroutine tether_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, &
                              comm, ierr)
    type(*), dimension(..), target, intent(in) :: sendbuf
    type(*), dimension(..), target, intent(inout) :: recvbuf
    integer, intent(in) :: sendcounts(*), sdispls(*), recvcounts(*), rdispls(*)
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: sp, rp
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) &
      ierr = c_alltoallv(sp, sendcounts, sdispls, sendtype, rp, recvcounts, rdispls, recvtype, comm)
  end subroutine tether_alltoallv

  subroutine tether_ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, &
                               comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: sendbuf
    type(*), dimension(..), target, asynchronous, intent(inout) :: recvbuf
    integer, intent(in) :: sendcounts(*), sdispls(*), recvcounts(*), rdispls(*)
    integer, intent(in) :: sendtype, recvtype, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: sp, rp
    integer(c_int) :: r
    call addresses(sendbuf, recvbuf, sp, rp, ierr)
    if (ierr == TETHER_SUCCESS) &
      ierr = c_ialltoallv(sp, sendcounts, sdispls, sendtype, rp, recvcounts, rdispls, recvtype, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine tether_ialltoallv
end module tether_collectives
