! What the Fortran wrappers share: the special buffers and statuses that
! stand for C's NULL and (void *)-1, the buffer-to-pointer rule, status
! conversion and string conversion.
module tether_support
  use, intrinsic :: iso_c_binding, only: c_ptr, c_loc, c_associated, c_null_ptr, c_intptr_t, &
      c_char, c_null_char
  use tether_c, only: tether_status_c, TETHER_SUCCESS, TETHER_ERR_ARG, TETHER_STATUS_SIZE, &
      TETHER_SOURCE, TETHER_TAG, TETHER_ERROR, TETHER_STATUS_BYTES
  implicit none
  private

  public :: TETHER_IN_PLACE, TETHER_STATUS_IGNORE, TETHER_STATUSES_IGNORE
  public :: buffer_address, collective_address, status_address, statuses_address
  public :: to_fortran_status, to_c_status, c_string, fortran_string

  ! Pass as a collective's send buffer (for scatter and scatterv: the root's
  ! receive buffer) where MPI allows MPI_IN_PLACE. Only its address counts.
  integer, target, save :: TETHER_IN_PLACE = 0

  ! Pass as a status, or as the status array of waitall/testall, to ignore
  ! it. Only their addresses count; nothing is ever written into them.
  integer, target, save :: TETHER_STATUS_IGNORE(TETHER_STATUS_SIZE) = 0
  integer, target, save :: TETHER_STATUSES_IGNORE(TETHER_STATUS_SIZE, 1) = 0

contains

  ! The C address of `buf` for a point-to-point call. A non-contiguous
  ! array section cannot be described by one address: ierr = TETHER_ERR_ARG.
  subroutine buffer_address(buf, ptr, ierr)
    type(*), dimension(..), target, intent(in) :: buf
    type(c_ptr), intent(out) :: ptr
    integer, intent(out) :: ierr
    ptr = c_null_ptr
    if (.not. is_contiguous(buf)) then
      ierr = TETHER_ERR_ARG
      return
    end if
    ptr = c_loc(buf)
    ierr = TETHER_SUCCESS
  end subroutine buffer_address

  ! `buffer_address` for a collective's buffer: TETHER_IN_PLACE becomes C's
  ! TETHER_IN_PLACE, (void *)-1.
  subroutine collective_address(buf, ptr, ierr)
    type(*), dimension(..), target, intent(in) :: buf
    type(c_ptr), intent(out) :: ptr
    integer, intent(out) :: ierr
    call buffer_address(buf, ptr, ierr)
    if (ierr == TETHER_SUCCESS .and. c_associated(ptr, c_loc(TETHER_IN_PLACE))) then
      ptr = transfer(-1_c_intptr_t, ptr)
    end if
  end subroutine collective_address

  ! C's status pointer for a Fortran status: NULL for TETHER_STATUS_IGNORE,
  ! otherwise the address of `scratch`, which the caller converts back with
  ! to_fortran_status after the call.
  function status_address(status, scratch) result(ptr)
    integer, target, intent(in) :: status(TETHER_STATUS_SIZE)
    type(tether_status_c), target, intent(in) :: scratch
    type(c_ptr) :: ptr
    if (c_associated(c_loc(status), c_loc(TETHER_STATUS_IGNORE))) then
      ptr = c_null_ptr
    else
      ptr = c_loc(scratch)
    end if
  end function status_address

  ! `status_address` for the status array of waitall/testall.
  function statuses_address(statuses, scratch) result(ptr)
    integer, target, intent(in) :: statuses(TETHER_STATUS_SIZE, *)
    type(tether_status_c), target, intent(in) :: scratch(:)
    type(c_ptr) :: ptr
    if (size(scratch) == 0) then
      ptr = c_null_ptr
    else if (c_associated(c_loc(statuses(1, 1)), c_loc(TETHER_STATUSES_IGNORE))) then
      ptr = c_null_ptr
    else
      ptr = c_loc(scratch)
    end if
  end function statuses_address

  pure subroutine to_fortran_status(from, status)
    type(tether_status_c), intent(in) :: from
    integer, intent(out) :: status(TETHER_STATUS_SIZE)
    status = 0
    status(TETHER_SOURCE) = from%source
    status(TETHER_TAG) = from%tag
    status(TETHER_ERROR) = from%error
    status(TETHER_STATUS_BYTES:TETHER_STATUS_BYTES + 1) = transfer(from%bytes, status, 2)
  end subroutine to_fortran_status

  pure function to_c_status(status) result(to)
    integer, intent(in) :: status(TETHER_STATUS_SIZE)
    type(tether_status_c) :: to
    to%source = status(TETHER_SOURCE)
    to%tag = status(TETHER_TAG)
    to%error = status(TETHER_ERROR)
    to%bytes = transfer(status(TETHER_STATUS_BYTES:TETHER_STATUS_BYTES + 1), to%bytes)
  end function to_c_status

  ! A Fortran string, trailing blanks removed, as a NUL-terminated C string.
  pure function c_string(text) result(chars)
    character(len=*), intent(in) :: text
    character(kind=c_char) :: chars(len_trim(text) + 1)
    integer :: i
    do i = 1, len_trim(text)
      chars(i) = text(i:i)
    end do
    chars(len_trim(text) + 1) = c_null_char
  end function c_string

  ! A NUL-terminated C string into a blank-padded Fortran string.
  pure subroutine fortran_string(chars, text)
    character(kind=c_char), intent(in) :: chars(:)
    character(len=*), intent(out) :: text
    integer :: i
    text = ' '
    do i = 1, min(size(chars), len(text))
      if (chars(i) == c_null_char) exit
      text(i:i) = chars(i)
    end do
  end subroutine fortran_string
end module tether_support
