! Helpers shared by the Fortran test programs: checked calls and
! expectations that stop the program (exit code 1) with the reason.
module checks
  use tether
  implicit none
  private
  public :: check, expect, expect_code

contains

  ! Stops with tether_last_error's message unless ierr is TETHER_SUCCESS.
  subroutine check(ierr, what)
    integer, intent(in) :: ierr
    character(len=*), intent(in) :: what
    character(len=TETHER_MAX_ERROR_STRING) :: msg
    integer :: e
    if (ierr == TETHER_SUCCESS) return
    call tether_last_error(msg, e)
    write (*, '(a, ": ierr ", i0, ": ", a)') what, ierr, trim(msg)
    error stop 1
  end subroutine check

  subroutine expect(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    if (cond) return
    write (*, '("expected ", a)') what
    error stop 1
  end subroutine expect

  ! Expects error class `want` in ierr.
  subroutine expect_code(ierr, want, what)
    integer, intent(in) :: ierr, want
    character(len=*), intent(in) :: what
    if (ierr == want) return
    write (*, '(a, ": ierr ", i0, ", expected ", i0)') what, ierr, want
    error stop 1
  end subroutine expect_code
end module checks
