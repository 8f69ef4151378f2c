! Active messages (DESIGN 3.7) as Fortran subroutines: a message runs a
! handler the receiving program registered, inside that program's
! progress, without a matching receive.
!
!   call tether_am_register(7, on_request, c_null_ptr, ierr)
!   call tether_am_send(dest, 7, key, 4, data, 8 * size(data), comm, req, ierr)
!   do while (.not. answered); call tether_progress(ierr); end do
!
! A handler is a `bind(C)` subroutine with the interface
! tether_am_handler: the C handler's arguments, by value. `header` and
! `payload` are C addresses of the library's buffers, valid only during
! the call (C_NULL_PTR when their length is 0); read them through
! c_f_pointer:
!
!   subroutine on_request(ctx, source, header, header_len, payload, payload_len) bind(C)
!     integer(int32), pointer :: key
!     call c_f_pointer(header, key)
!
! `ctx` is what was registered with the handler (C_NULL_PTR, or c_loc of
! the program's own data); registering C_NULL_FUNPTR unregisters an id. Inside a handler only tether_am_send may be
! called: it copies its buffers, sets `req` to TETHER_REQUEST_NULL and the
! message leaves when the handler returns; every other call gives
! TETHER_ERR_ARG, its arguments untouched.
!
! Header and payload lengths are in BYTES (C's size_t), default `integer`
! or `integer(8)` in any mix; the buffers are `type(*), dimension(..)`: a
! scalar or a contiguous array of any rank, type and kind (a
! non-contiguous section gives TETHER_ERR_ARG, a negative length
! TETHER_ERR_COUNT). The header is copied at once; the payload is read
! until `req` completes (give it the `asynchronous` attribute and leave it
! alone until tether_wait returns).
module tether_active
  use, intrinsic :: iso_c_binding, only: c_ptr, c_int, c_size_t, c_funptr, c_funloc
  use, intrinsic :: iso_fortran_env, only: int32, int64
  use tether_c
  use tether_support
  implicit none
  private
  public :: tether_am_handler, tether_am_register, tether_am_send

  abstract interface
    ! What a handler looks like: `source` is the sender's rank in the
    ! communicator it sent on; `header` and `payload` hold `header_len`
    ! and `payload_len` bytes during the call.
    subroutine tether_am_handler(ctx, source, header, header_len, payload, payload_len) bind(C)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: ctx
      integer(c_int), value :: source
      type(c_ptr), value :: header
      integer(c_size_t), value :: header_len
      type(c_ptr), value :: payload
      integer(c_size_t), value :: payload_len
    end subroutine tether_am_handler
  end interface

  interface tether_am_register
    module procedure am_register_procedure, am_register_funptr
  end interface
  interface tether_am_send
    module procedure am_send_88, am_send_84, am_send_48, am_send_44
  end interface

contains

  ! Registers `handler` for id `id` (0 to 1023) in this process, replacing
  ! the one before, with `ctx` handed back to it on every call. `handler`
  ! is a bind(C) procedure with the tether_am_handler interface, or a
  ! type(c_funptr): C_NULL_FUNPTR unregisters the id (as NULL does in C).
  ! Register before the synchronisation that precedes the first message
  ! that could reach it.
  subroutine am_register_procedure(id, handler, ctx, ierr)
    integer, intent(in) :: id
    procedure(tether_am_handler) :: handler
    type(c_ptr), intent(in) :: ctx
    integer, intent(out) :: ierr
    ierr = c_am_register(id, c_funloc(handler), ctx)
  end subroutine am_register_procedure

  subroutine am_register_funptr(id, handler, ctx, ierr)
    integer, intent(in) :: id
    type(c_funptr), intent(in) :: handler
    type(c_ptr), intent(in) :: ctx
    integer, intent(out) :: ierr
    ierr = c_am_register(id, handler, ctx)
  end subroutine am_register_funptr

  ! Sends an active message for handler `id` to rank `dest` of `comm`:
  ! `header_len` bytes of `header` and `payload_len` bytes of `payload`.
  ! `req` completes when `payload` may be reused (TETHER_REQUEST_NULL from
  ! inside a handler, where both are copied).
  subroutine am_send_88(dest, id, header, header_len, payload, payload_len, comm, req, ierr)
    integer, intent(in) :: dest, id
    type(*), dimension(..), target, intent(in) :: header
    integer(int64), intent(in) :: header_len
    type(*), dimension(..), target, asynchronous, intent(in) :: payload
    integer(int64), intent(in) :: payload_len
    integer, intent(in) :: comm
    integer, intent(out) :: req, ierr
    type(c_ptr) :: h, p
    integer(c_int) :: r
    if (header_len < 0 .or. payload_len < 0) then
      ierr = TETHER_ERR_COUNT
      return
    end if
    call buffer_address(header, h, ierr)
    if (ierr == TETHER_SUCCESS) call buffer_address(payload, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_am_send(dest, id, h, int(header_len, c_size_t), p, &
        int(payload_len, c_size_t), comm, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine am_send_88

  subroutine am_send_84(dest, id, header, header_len, payload, payload_len, comm, req, ierr)
    integer, intent(in) :: dest, id
    type(*), dimension(..), target, intent(in) :: header
    integer(int64), intent(in) :: header_len
    type(*), dimension(..), target, asynchronous, intent(in) :: payload
    integer(int32), intent(in) :: payload_len
    integer, intent(in) :: comm
    integer, intent(out) :: req, ierr
    call am_send_88(dest, id, header, header_len, payload, int(payload_len, int64), comm, req, ierr)
  end subroutine am_send_84

  subroutine am_send_48(dest, id, header, header_len, payload, payload_len, comm, req, ierr)
    integer, intent(in) :: dest, id
    type(*), dimension(..), target, intent(in) :: header
    integer(int32), intent(in) :: header_len
    type(*), dimension(..), target, asynchronous, intent(in) :: payload
    integer(int64), intent(in) :: payload_len
    integer, intent(in) :: comm
    integer, intent(out) :: req, ierr
    call am_send_88(dest, id, header, int(header_len, int64), payload, payload_len, comm, req, ierr)
  end subroutine am_send_48

  subroutine am_send_44(dest, id, header, header_len, payload, payload_len, comm, req, ierr)
    integer, intent(in) :: dest, id
    type(*), dimension(..), target, intent(in) :: header
    integer(int32), intent(in) :: header_len
    type(*), dimension(..), target, asynchronous, intent(in) :: payload
    integer(int32), intent(in) :: payload_len
    integer, intent(in) :: comm
    integer, intent(out) :: req, ierr
    call am_send_88(dest, id, header, int(header_len, int64), payload, int(payload_len, int64), comm, req, ierr)
  end subroutine am_send_44
end module tether_active
