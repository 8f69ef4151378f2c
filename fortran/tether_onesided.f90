! One-sided operations (DESIGN 3.7) as Fortran subroutines: windows,
! put, get, rput, rget, accumulate, fetch_and_op, compare_and_swap, flush
! and fence, each mirroring its C twin with a trailing `ierr`:
!
!   call tether_win_create(a, size(a) * 8_int64, comm, win, ierr)   ! a: real(real64)
!   call tether_put(x, size(x), TETHER_DOUBLE_PRECISION, target, 8 * (i - 1), win, ierr)
!   call tether_win_flush(target, win, ierr)
!
! Buffers are `type(*), dimension(..)`: a scalar or a contiguous array of
! any rank, type and kind (a non-contiguous section gives TETHER_ERR_ARG).
! Counts (in elements), window sizes and target offsets (in BYTES, as in
! C, counted from the start of the target's window: element i of a
! real(real64) window is at offset 8 * (i - 1)) are default `integer` or
! `integer(8)`, in any mix.
!
! A window's memory and the origin and result buffers of put, get,
! accumulate, fetch_and_op and compare_and_swap are used after the call
! returns: a window until tether_win_free, the others until the next
! tether_win_flush of that target, tether_win_flush_all or
! tether_win_fence (rput and rget: until their request completes). Give
! them the `target` (or `asynchronous`) attribute and do not touch them
! before then; the window's own memory is read and written by the program
! only between fences, or once a message says the origin's flush returned.
! `ierr` gets TETHER_SUCCESS or the error class, never an abort:
! TETHER_ERR_RMA_RANGE for an access outside the target's window (nothing
! is changed there), TETHER_ERR_OP for an invalid (type, op) pair.
module tether_onesided
  use, intrinsic :: iso_c_binding, only: c_ptr, c_int, c_int64_t
  use, intrinsic :: iso_fortran_env, only: int32, int64
  use tether_c
  use tether_support
  implicit none
  private
  public :: tether_win_create, tether_win_free, tether_put, tether_get, tether_rput, tether_rget
  public :: tether_accumulate, tether_fetch_and_op, tether_compare_and_swap
  public :: tether_win_flush, tether_win_flush_all, tether_win_fence

  interface tether_win_create
    module procedure win_create_i4, win_create_i8
  end interface
  interface tether_put
    module procedure put_88, put_84, put_48, put_44
  end interface
  interface tether_get
    module procedure get_88, get_84, get_48, get_44
  end interface
  interface tether_rput
    module procedure rput_88, rput_84, rput_48, rput_44
  end interface
  interface tether_rget
    module procedure rget_88, rget_84, rget_48, rget_44
  end interface
  interface tether_accumulate
    module procedure accumulate_88, accumulate_84, accumulate_48, accumulate_44
  end interface
  interface tether_fetch_and_op
    module procedure fetch_and_op_8, fetch_and_op_4
  end interface
  interface tether_compare_and_swap
    module procedure compare_and_swap_8, compare_and_swap_4
  end interface

contains

  ! Exposes `bytes` bytes of `base` to the members of `comm`; collective.
  ! Every member passes its own memory and size (0 bytes allowed); `base`
  ! must stay in place until tether_win_free.
  subroutine win_create_i8(base, bytes, comm, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: base
    integer(int64), intent(in) :: bytes
    integer, intent(in) :: comm
    integer, intent(out) :: win, ierr
    type(c_ptr) :: p
    integer(c_int) :: w
    call buffer_address(base, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_win_create(p, bytes, comm, w)
    if (ierr == TETHER_SUCCESS) win = w
  end subroutine win_create_i8

  subroutine win_create_i4(base, bytes, comm, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: base
    integer(int32), intent(in) :: bytes
    integer, intent(in) :: comm
    integer, intent(out) :: win, ierr
    call win_create_i8(base, int(bytes, int64), comm, win, ierr)
  end subroutine win_create_i4

  ! Completes every member's operations, frees the window and sets `win`
  ! to TETHER_WIN_NULL; collective.
  subroutine tether_win_free(win, ierr)
    integer, intent(inout) :: win
    integer, intent(out) :: ierr
    ierr = c_win_free(win)
  end subroutine tether_win_free

  ! Writes `count` elements of `origin` into rank `target`'s window at
  ! `offset` bytes; complete (and `origin` reusable) after the next flush.
  subroutine put_88(origin, count, datatype, target, offset, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    call buffer_address(origin, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_put(p, count, datatype, target, offset, win)
  end subroutine put_88

  subroutine put_84(origin, count, datatype, target, offset, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    call put_88(origin, int(count, int64), datatype, target, int(offset, int64), win, ierr)
  end subroutine put_84

  subroutine put_48(origin, count, datatype, target, offset, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    call put_88(origin, int(count, int64), datatype, target, int(offset, int64), win, ierr)
  end subroutine put_48

  subroutine put_44(origin, count, datatype, target, offset, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    call put_88(origin, int(count, int64), datatype, target, int(offset, int64), win, ierr)
  end subroutine put_44

  ! Reads `count` elements of rank `target`'s window at `offset` bytes into
  ! `origin`, which holds them after the next flush of that target.
  subroutine get_88(origin, count, datatype, target, offset, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: origin
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    call buffer_address(origin, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_get(p, count, datatype, target, offset, win)
  end subroutine get_88

  subroutine get_84(origin, count, datatype, target, offset, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: origin
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    call get_88(origin, int(count, int64), datatype, target, int(offset, int64), win, ierr)
  end subroutine get_84

  subroutine get_48(origin, count, datatype, target, offset, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: origin
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    call get_88(origin, int(count, int64), datatype, target, int(offset, int64), win, ierr)
  end subroutine get_48

  subroutine get_44(origin, count, datatype, target, offset, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: origin
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    call get_88(origin, int(count, int64), datatype, target, int(offset, int64), win, ierr)
  end subroutine get_44

  ! tether_put with a request that completes once `origin` may be reused
  ! (the data is in the target's memory after the next flush).
  subroutine rput_88(origin, count, datatype, target, offset, win, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: req, ierr
    type(c_ptr) :: p
    integer(c_int) :: r
    call buffer_address(origin, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_rput(p, count, datatype, target, offset, win, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine rput_88

  subroutine rput_84(origin, count, datatype, target, offset, win, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: req, ierr
    call rput_88(origin, int(count, int64), datatype, target, int(offset, int64), win, req, ierr)
  end subroutine rput_84

  subroutine rput_48(origin, count, datatype, target, offset, win, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: req, ierr
    call rput_88(origin, int(count, int64), datatype, target, int(offset, int64), win, req, ierr)
  end subroutine rput_48

  subroutine rput_44(origin, count, datatype, target, offset, win, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: req, ierr
    call rput_88(origin, int(count, int64), datatype, target, int(offset, int64), win, req, ierr)
  end subroutine rput_44

  ! tether_get with a request that completes once the data is in `origin`.
  subroutine rget_88(origin, count, datatype, target, offset, win, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: origin
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: req, ierr
    type(c_ptr) :: p
    integer(c_int) :: r
    call buffer_address(origin, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_rget(p, count, datatype, target, offset, win, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine rget_88

  subroutine rget_84(origin, count, datatype, target, offset, win, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: origin
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: req, ierr
    call rget_88(origin, int(count, int64), datatype, target, int(offset, int64), win, req, ierr)
  end subroutine rget_84

  subroutine rget_48(origin, count, datatype, target, offset, win, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: origin
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: req, ierr
    call rget_88(origin, int(count, int64), datatype, target, int(offset, int64), win, req, ierr)
  end subroutine rget_48

  subroutine rget_44(origin, count, datatype, target, offset, win, req, ierr)
    type(*), dimension(..), target, asynchronous, intent(inout) :: origin
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: req, ierr
    call rget_88(origin, int(count, int64), datatype, target, int(offset, int64), win, req, ierr)
  end subroutine rget_44

  ! Combines `count` elements of `origin` into rank `target`'s window at
  ! `offset` bytes with `op` (a reduction, TETHER_REPLACE or TETHER_NO_OP),
  ! atomically per element; complete after the next flush.
  subroutine accumulate_88(origin, count, datatype, target, offset, op, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: op, win
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    call buffer_address(origin, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_accumulate(p, count, datatype, target, offset, op, win)
  end subroutine accumulate_88

  subroutine accumulate_84(origin, count, datatype, target, offset, op, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int64), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: op, win
    integer, intent(out) :: ierr
    call accumulate_88(origin, int(count, int64), datatype, target, int(offset, int64), op, win, ierr)
  end subroutine accumulate_84

  subroutine accumulate_48(origin, count, datatype, target, offset, op, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: op, win
    integer, intent(out) :: ierr
    call accumulate_88(origin, int(count, int64), datatype, target, int(offset, int64), op, win, ierr)
  end subroutine accumulate_48

  subroutine accumulate_44(origin, count, datatype, target, offset, op, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    integer(int32), intent(in) :: count
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: op, win
    integer, intent(out) :: ierr
    call accumulate_88(origin, int(count, int64), datatype, target, int(offset, int64), op, win, ierr)
  end subroutine accumulate_44

  ! Combines the one element `origin` into rank `target`'s window at
  ! `offset` bytes with `op` and fetches the element's value before into
  ! `result`, atomically (TETHER_NO_OP: an atomic read). `result` holds it
  ! after the next flush. Integer and floating types, aligned to their size.
  subroutine fetch_and_op_8(origin, result, datatype, target, offset, op, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    type(*), dimension(..), target, asynchronous, intent(inout) :: result
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: op, win
    integer, intent(out) :: ierr
    type(c_ptr) :: p, r
    call buffer_address(origin, p, ierr)
    if (ierr == TETHER_SUCCESS) call buffer_address(result, r, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_fetch_and_op(p, r, datatype, target, offset, op, win)
  end subroutine fetch_and_op_8

  subroutine fetch_and_op_4(origin, result, datatype, target, offset, op, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin
    type(*), dimension(..), target, asynchronous, intent(inout) :: result
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: op, win
    integer, intent(out) :: ierr
    call fetch_and_op_8(origin, result, datatype, target, int(offset, int64), op, win, ierr)
  end subroutine fetch_and_op_4

  ! Replaces the one element at rank `target`'s window at `offset` bytes
  ! with `origin` if it equals `compare`, and fetches its value before into
  ! `result`, atomically; `result` holds it after the next flush. Integer
  ! types, aligned to their size.
  subroutine compare_and_swap_8(origin, compare, result, datatype, target, offset, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin, compare
    type(*), dimension(..), target, asynchronous, intent(inout) :: result
    integer, intent(in) :: datatype, target
    integer(int64), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    type(c_ptr) :: p, c, r
    call buffer_address(origin, p, ierr)
    if (ierr == TETHER_SUCCESS) call buffer_address(compare, c, ierr)
    if (ierr == TETHER_SUCCESS) call buffer_address(result, r, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_compare_and_swap(p, c, r, datatype, target, offset, win)
  end subroutine compare_and_swap_8

  subroutine compare_and_swap_4(origin, compare, result, datatype, target, offset, win, ierr)
    type(*), dimension(..), target, asynchronous, intent(in) :: origin, compare
    type(*), dimension(..), target, asynchronous, intent(inout) :: result
    integer, intent(in) :: datatype, target
    integer(int32), intent(in) :: offset
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    call compare_and_swap_8(origin, compare, result, datatype, target, int(offset, int64), win, ierr)
  end subroutine compare_and_swap_4

  ! Blocks until every operation this process issued on `win` to rank
  ! `target` is complete there (and its results here); ierr reports the
  ! first of them that failed (TETHER_ERR_PEER_LOST, _RMA_RANGE, _OP).
  subroutine tether_win_flush(target, win, ierr)
    integer, intent(in) :: target, win
    integer, intent(out) :: ierr
    ierr = c_win_flush(target, win)
  end subroutine tether_win_flush

  ! tether_win_flush for every member of `win`.
  subroutine tether_win_flush_all(win, ierr)
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    ierr = c_win_flush_all(win)
  end subroutine tether_win_flush_all

  ! Completes every member's operations on `win`; collective.
  subroutine tether_win_fence(win, ierr)
    integer, intent(in) :: win
    integer, intent(out) :: ierr
    ierr = c_win_fence(win)
  end subroutine tether_win_fence
end module tether_onesided
