! Point to point (DESIGN 3.3) and datatype sizes as Fortran subroutines.
!
! Buffers are `type(*), dimension(..)`: a scalar or a contiguous array of
! any rank, type and kind. A non-contiguous section gives TETHER_ERR_ARG.
! Counts are default `integer` or `integer(8)` (one generic name, two
! specific procedures). Statuses are `integer :: status(TETHER_STATUS_SIZE)`
! or TETHER_STATUS_IGNORE; request handles are default integers. The
! buffer of a non-blocking call must stay in place, untouched, until the
! request completes (give it the `asynchronous` or `target` attribute).
! `ierr` gets TETHER_SUCCESS or the error class, never an abort.
module tether_p2p
  use, intrinsic :: iso_c_binding, only: c_ptr, c_int, c_int64_t
  use, intrinsic :: iso_fortran_env, only: int32, int64
  use tether_c
  use tether_support
  implicit none
  private
  public :: tether_send, tether_recv, tether_isend, tether_irecv
  public :: tether_wait, tether_waitall, tether_waitany, tether_test, tether_testall
  public :: tether_probe, tether_iprobe, tether_cancel, tether_get_count, tether_type_size
  public :: tether_progress

  interface tether_send
    module procedure send_i4, send_i8
  end interface
  interface tether_recv
    module procedure recv_i4, recv_i8
  end interface
  interface tether_isend
    module procedure isend_i4, isend_i8
  end interface
  interface tether_irecv
    module procedure irecv_i4, irecv_i8
  end interface
  ! The element count of a status: into a default integer (TETHER_UNDEFINED
  ! also when it does not fit) or an integer(8).
  interface tether_get_count
    module procedure get_count_i4, get_count_i8
  end interface

contains

  ! Sends `count` elements of `buf`; returns when `buf` may be reused.
  subroutine send_i8(buf, count, datatype, dest, tag, comm, ierr)
    type(*), dimension(..), target, intent(in) :: buf
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, dest, tag, comm
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    call buffer_address(buf, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_send(p, count, datatype, dest, tag, comm)
  end subroutine send_i8

  subroutine send_i4(buf, count, datatype, dest, tag, comm, ierr)
    type(*), dimension(..), target, intent(in) :: buf
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, dest, tag, comm
    integer, intent(out) :: ierr
    call send_i8(buf, int(count, int64), datatype, dest, tag, comm, ierr)
  end subroutine send_i4

  ! Receives into `buf`. A longer message gives TETHER_ERR_TRUNCATE with
  ! its true size in `status`; the status is filled in either case.
  subroutine recv_i8(buf, count, datatype, source, tag, comm, status, ierr)
    type(*), dimension(..), target, intent(inout) :: buf
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, source, tag, comm
    integer, target, intent(inout) :: status(TETHER_STATUS_SIZE)
    integer, intent(out) :: ierr
    type(c_ptr) :: p, sp
    type(tether_status_c), target :: st
    call buffer_address(buf, p, ierr)
    if (ierr /= TETHER_SUCCESS) return
    sp = status_address(status, st)
    ierr = c_recv(p, count, datatype, source, tag, comm, sp)
    if (ierr == TETHER_SUCCESS .or. ierr == TETHER_ERR_TRUNCATE) call store(st, status)
  end subroutine recv_i8

  subroutine recv_i4(buf, count, datatype, source, tag, comm, status, ierr)
    type(*), dimension(..), target, intent(inout) :: buf
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, source, tag, comm
    integer, target, intent(inout) :: status(TETHER_STATUS_SIZE)
    integer, intent(out) :: ierr
    call recv_i8(buf, int(count, int64), datatype, source, tag, comm, status, ierr)
  end subroutine recv_i4

  ! Starts a send; `req` is set on success.
  subroutine isend_i8(buf, count, datatype, dest, tag, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: buf
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, dest, tag, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: p
    integer(c_int) :: r
    call buffer_address(buf, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_isend(p, count, datatype, dest, tag, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine isend_i8

  subroutine isend_i4(buf, count, datatype, dest, tag, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: buf
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, dest, tag, comm
    integer, intent(out) :: req, ierr
    call isend_i8(buf, int(count, int64), datatype, dest, tag, comm, req, ierr)
  end subroutine isend_i4

  ! Posts a receive; `req` is set on success.
  subroutine irecv_i8(buf, count, datatype, source, tag, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: buf
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, source, tag, comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: p
    integer(c_int) :: r
    call buffer_address(buf, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_irecv(p, count, datatype, source, tag, comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine irecv_i8

  subroutine irecv_i4(buf, count, datatype, source, tag, comm, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: buf
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, source, tag, comm
    integer, intent(out) :: req, ierr
    call irecv_i8(buf, int(count, int64), datatype, source, tag, comm, req, ierr)
  end subroutine irecv_i4

  ! Waits for `req`, fills `status`, sets `req` to TETHER_REQUEST_NULL;
  ! ierr is the operation's error class (TETHER_ERR_TRUNCATE, ...).
  subroutine tether_wait(req, status, ierr)
    integer, intent(inout) :: req
    integer, target, intent(inout) :: status(TETHER_STATUS_SIZE)
    integer, intent(out) :: ierr
    type(tether_status_c), target :: st
    ierr = c_wait(req, status_address(status, st))
    call store(st, status)
  end subroutine tether_wait

  ! Waits for all `n` requests; statuses(:, i) describes reqs(i); ierr is
  ! the first error class among them.
  subroutine tether_waitall(n, reqs, statuses, ierr)
    integer, intent(in) :: n
    integer, intent(inout) :: reqs(*)
    integer, target, intent(inout) :: statuses(TETHER_STATUS_SIZE, *)
    integer, intent(out) :: ierr
    type(tether_status_c), allocatable, target :: st(:)
    allocate (st(max(n, 0)))
    ierr = c_waitall(n, reqs, statuses_address(statuses, st))
    call store_all(st, statuses)
  end subroutine tether_waitall

  ! Waits until one of the `n` requests completes; `index` is its
  ! position, 1-based as in MPI's Fortran bindings (TETHER_UNDEFINED when
  ! none is active).
  subroutine tether_waitany(n, reqs, index, status, ierr)
    integer, intent(in) :: n
    integer, intent(inout) :: reqs(*)
    integer, intent(out) :: index
    integer, target, intent(inout) :: status(TETHER_STATUS_SIZE)
    integer, intent(out) :: ierr
    type(tether_status_c), target :: st
    integer(c_int) :: i
    i = TETHER_UNDEFINED
    ierr = c_waitany(n, reqs, i, status_address(status, st))
    index = merge(i, i + 1, i == TETHER_UNDEFINED)
    call store(st, status)
  end subroutine tether_waitany

  ! `flag` = .true. and the request completed and freed if it is done.
  subroutine tether_test(req, flag, status, ierr)
    integer, intent(inout) :: req
    logical, intent(out) :: flag
    integer, target, intent(inout) :: status(TETHER_STATUS_SIZE)
    integer, intent(out) :: ierr
    type(tether_status_c), target :: st
    integer(c_int) :: f
    f = 0
    ierr = c_test(req, f, status_address(status, st))
    flag = f /= 0
    if (flag) call store(st, status)
  end subroutine tether_test

  ! `flag` = .true. and all requests completed and freed if all are done.
  subroutine tether_testall(n, reqs, flag, statuses, ierr)
    integer, intent(in) :: n
    integer, intent(inout) :: reqs(*)
    logical, intent(out) :: flag
    integer, target, intent(inout) :: statuses(TETHER_STATUS_SIZE, *)
    integer, intent(out) :: ierr
    type(tether_status_c), allocatable, target :: st(:)
    integer(c_int) :: f
    allocate (st(max(n, 0)))
    f = 0
    ierr = c_testall(n, reqs, f, statuses_address(statuses, st))
    flag = f /= 0
    if (flag) call store_all(st, statuses)
  end subroutine tether_testall

  ! Waits until a message matching (source, tag, comm) can be received and
  ! describes it in `status` without receiving it.
  subroutine tether_probe(source, tag, comm, status, ierr)
    integer, intent(in) :: source, tag, comm
    integer, target, intent(inout) :: status(TETHER_STATUS_SIZE)
    integer, intent(out) :: ierr
    type(tether_status_c), target :: st
    ierr = c_probe(source, tag, comm, status_address(status, st))
    if (ierr == TETHER_SUCCESS) call store(st, status)
  end subroutine tether_probe

  subroutine tether_iprobe(source, tag, comm, flag, status, ierr)
    integer, intent(in) :: source, tag, comm
    logical, intent(out) :: flag
    integer, target, intent(inout) :: status(TETHER_STATUS_SIZE)
    integer, intent(out) :: ierr
    type(tether_status_c), target :: st
    integer(c_int) :: f
    f = 0
    ierr = c_iprobe(source, tag, comm, f, status_address(status, st))
    if (ierr /= TETHER_SUCCESS) return
    flag = f /= 0
    if (flag) call store(st, status)
  end subroutine tether_iprobe

  ! Cancels a receive that has not matched yet; complete it with wait or
  ! test (its status then says TETHER_ERR_CANCELLED).
  subroutine tether_cancel(req, ierr)
    integer, intent(inout) :: req
    integer, intent(out) :: ierr
    ierr = c_cancel(req)
  end subroutine tether_cancel

  subroutine get_count_i8(status, datatype, count, ierr)
    integer, intent(in) :: status(TETHER_STATUS_SIZE)
    integer, intent(in) :: datatype
    integer(int64), intent(out) :: count
    integer, intent(out) :: ierr
    integer(c_int64_t) :: c
    ierr = c_get_count(to_c_status(status), datatype, c)
    if (ierr == TETHER_SUCCESS) count = c
  end subroutine get_count_i8

  subroutine get_count_i4(status, datatype, count, ierr)
    integer, intent(in) :: status(TETHER_STATUS_SIZE)
    integer, intent(in) :: datatype
    integer(int32), intent(out) :: count
    integer, intent(out) :: ierr
    integer(int64) :: c
    call get_count_i8(status, datatype, c, ierr)
    if (ierr /= TETHER_SUCCESS) return
    if (c > huge(count)) c = TETHER_UNDEFINED
    count = int(c, int32)
  end subroutine get_count_i4

  ! Size in bytes of one element of `datatype`.
  subroutine tether_type_size(datatype, size, ierr)
    integer, intent(in) :: datatype
    integer, intent(out) :: size, ierr
    integer(c_int) :: s
    ierr = c_type_size(datatype, s)
    if (ierr == TETHER_SUCCESS) size = s
  end subroutine tether_type_size

  ! Moves communication forward without waiting for anything.
  subroutine tether_progress(ierr)
    integer, intent(out) :: ierr
    ierr = c_progress()
  end subroutine tether_progress

  ! Copies a C status into a Fortran one, unless it is TETHER_STATUS_IGNORE.
  subroutine store(st, status)
    type(tether_status_c), intent(in) :: st
    integer, target, intent(inout) :: status(TETHER_STATUS_SIZE)
    type(tether_status_c), target :: probe
    if (is_ignored(status_address(status, probe))) return
    call to_fortran_status(st, status)
  end subroutine store

  subroutine store_all(st, statuses)
    type(tether_status_c), target, intent(in) :: st(:)
    integer, target, intent(inout) :: statuses(TETHER_STATUS_SIZE, *)
    integer :: i
    if (is_ignored(statuses_address(statuses, st))) return
    do i = 1, size(st)
      call to_fortran_status(st(i), statuses(:, i))
    end do
  end subroutine store_all

  logical function is_ignored(ptr)
    use, intrinsic :: iso_c_binding, only: c_associated
    type(c_ptr), intent(in) :: ptr
    is_ignored = .not. c_associated(ptr)
  end function is_ignored
end module tether_p2p
