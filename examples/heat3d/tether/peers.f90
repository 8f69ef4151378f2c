! What the Tether versions of the codes share: finding a peer's universe
! rank, and stopping with Tether's own message when a call fails.
module peers
  use tether
  implicit none
  private
  public :: universe_rank_of, program_size_of, check

contains

  ! Universe rank of rank `rank` of program `name`.
  integer function universe_rank_of(name, rank) result(u)
    character(len=*), intent(in) :: name
    integer, intent(in) :: rank
    integer :: id, ierr
    call tether_program_find(name, id, ierr)
    call check(ierr, 'tether_program_find ' // name)
    call tether_program_universe_rank(id, rank, u, ierr)
    call check(ierr, 'tether_program_universe_rank ' // name)
  end function universe_rank_of

  integer function program_size_of(name) result(size)
    character(len=*), intent(in) :: name
    integer :: id, ierr
    call tether_program_find(name, id, ierr)
    call check(ierr, 'tether_program_find ' // name)
    call tether_program_size(id, size, ierr)
    call check(ierr, 'tether_program_size ' // name)
  end function program_size_of

  ! Stops the program with Tether's detailed message unless ierr is
  ! TETHER_SUCCESS (`tether run` then ends the other programs).
  subroutine check(ierr, what)
    integer, intent(in) :: ierr
    character(len=*), intent(in) :: what
    character(len=TETHER_MAX_ERROR_STRING) :: message
    integer :: e
    if (ierr == TETHER_SUCCESS) return
    call tether_last_error(message, e)
    write (*, '(a, " failed (", i0, "): ", a)') what, ierr, trim(message)
    error stop 1
  end subroutine check
end module peers
