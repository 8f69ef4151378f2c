! A user's Fortran program, built against an installed Tether (the
! documented gfortran command, pkg-config or CMake) by
! tests/test_install.py: ../exchange.c in Fortran. Run as two programs
! under `tether run`, every process exchanges one greeting with every
! process of the other program and checks what it got.
program exchange
  use tether
  implicit none
  integer, parameter :: text = 96, tag = 7
  integer :: ierr, programs, me, rank, other, peers, first, j
  character(len=TETHER_MAX_PROGRAM_NAME) :: my_name, other_name
  character(len=text), allocatable :: sent(:), got(:)
  integer, allocatable :: reqs(:), statuses(:, :)

  call tether_init(ierr)
  call check(ierr, 'tether_init')
  call tether_program_count(programs, ierr)
  call check(ierr, 'tether_program_count')
  if (programs /= 2) error stop 'exchange: expected 2 programs'
  call tether_program_id(me, ierr)
  call check(ierr, 'tether_program_id')
  call tether_program_rank(rank, ierr)
  call check(ierr, 'tether_program_rank')
  other = 1 - me
  call tether_program_size(other, peers, ierr)
  call check(ierr, 'tether_program_size')
  first = 0
  if (other == 1) call tether_program_size(0, first, ierr)
  call check(ierr, 'tether_program_size')
  call tether_program_name(me, my_name, ierr)
  call check(ierr, 'tether_program_name')
  call tether_program_name(other, other_name, ierr)
  call check(ierr, 'tether_program_name')

  allocate (sent(peers), got(peers), reqs(2 * peers), statuses(TETHER_STATUS_SIZE, 2 * peers))
  do j = 1, peers
    sent(j) = greeting(my_name, rank, other_name, j - 1)
    call tether_irecv(got(j), text, TETHER_CHARACTER, first + j - 1, tag, TETHER_COMM_UNIVERSE, reqs(2 * j - 1), ierr)
    call check(ierr, 'tether_irecv')
    call tether_isend(sent(j), text, TETHER_CHARACTER, first + j - 1, tag, TETHER_COMM_UNIVERSE, reqs(2 * j), ierr)
    call check(ierr, 'tether_isend')
  end do
  call tether_waitall(2 * peers, reqs, statuses, ierr)
  call check(ierr, 'tether_waitall')
  do j = 1, peers
    if (statuses(TETHER_SOURCE, 2 * j - 1) /= first + j - 1 .or. got(j) /= greeting(other_name, j - 1, my_name, rank)) then
      write (*, '("exchange: from universe rank ", i0, " got """, a, """")') statuses(TETHER_SOURCE, 2 * j - 1), trim(got(j))
      error stop 1
    end if
  end do
  write (*, '("exchange ok: ", a, ":", i0, " with ", i0, " of ", a)') trim(my_name), rank, peers, trim(other_name)
  call tether_finalize(ierr)
  call check(ierr, 'tether_finalize')

contains

  function greeting(from, from_rank, to, to_rank) result(line)
    character(len=*), intent(in) :: from, to
    integer, intent(in) :: from_rank, to_rank
    character(len=text) :: line
    write (line, '("greeting from ", a, ":", i0, " to ", a, ":", i0)') trim(from), from_rank, trim(to), to_rank
  end function greeting

  subroutine check(code, what)
    integer, intent(in) :: code
    character(len=*), intent(in) :: what
    character(len=TETHER_MAX_ERROR_STRING) :: name, detail
    integer :: e
    if (code == TETHER_SUCCESS) return
    call tether_error_string(code, name, e)
    call tether_last_error(detail, e)
    write (*, '("exchange: ", a, " failed: ", a, " (", a, ")")') what, trim(name), trim(detail)
    error stop 1
  end subroutine check
end program exchange
