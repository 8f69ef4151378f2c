! The file coupling of the original codes: one record at a time through a
! file (s1.out, s2.out) in the working directory, as a one-slot mailbox.
!
! The writer waits until the previous record was taken (the file is gone),
! writes the new one to <file>.tmp and renames it to <file>, so a reader
! never sees half a record. The reader polls until the file appears,
! reads it, checks that it is the step it expects, and deletes it. Polls
! sleep 200 microseconds. Start every run without stale s1.out/s2.out:
! a reader that finds another step stops with a message saying so.
module mailbox
  use, intrinsic :: iso_c_binding, only: c_int, c_char, c_null_char
  use, intrinsic :: iso_fortran_env, only: real64
  implicit none
  private
  public :: post, take

  interface
    integer(c_int) function c_rename(old, new) bind(C, name='rename')
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: old(*), new(*)
    end function
    integer(c_int) function c_usleep(usec) bind(C, name='usleep')
      import :: c_int
      integer(c_int), value :: usec
    end function
  end interface

contains

  ! Publishes record `step` (values) as `file`.
  subroutine post(file, step, values)
    character(len=*), intent(in) :: file
    integer, intent(in) :: step
    real(real64), intent(in) :: values(:)
    integer :: unit
    do while (exists(file))
      call pause()
    end do
    open (newunit=unit, file=file // '.tmp', status='replace', action='write')
    write (unit, '(i0, 1x, i0)') step, size(values)
    write (unit, '(es24.16e3)') values
    close (unit)
    if (c_rename(file // '.tmp' // c_null_char, file // c_null_char) /= 0) then
      write (*, '(a)') 'cannot rename ' // file // '.tmp to ' // file
      error stop 1
    end if
  end subroutine post

  ! Waits for record `step` in `file`, reads its values and removes it.
  subroutine take(file, step, values)
    character(len=*), intent(in) :: file
    integer, intent(in) :: step
    real(real64), intent(out) :: values(:)
    integer :: unit, got, n
    do while (.not. exists(file))
      call pause()
    end do
    open (newunit=unit, file=file, status='old', action='read')
    read (unit, *) got, n
    if (got /= step .or. n /= size(values)) then
      write (*, '(a, " holds step ", i0, " of ", i0, " values, expected step ", i0, " of ", i0, &
            & ": remove stale s1.out and s2.out before starting")') file, got, n, step, size(values)
      error stop 1
    end if
    read (unit, *) values
    close (unit, status='delete')
  end subroutine take

  logical function exists(file)
    character(len=*), intent(in) :: file
    inquire (file=file, exist=exists)
  end function exists

  subroutine pause()
    integer(c_int) :: ignored
    ignored = c_usleep(200_c_int)
  end subroutine pause
end module mailbox
