! Timing and reporting, shared by every code of the heat example in both
! versions: the clock, a history file at full precision (the test
! compares the two versions' histories), and the time per coupling step,
! split into exchanging with the other codes and computing.
module heat3d_report
  use, intrinsic :: iso_c_binding, only: c_int
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  private
  public :: stopwatch, now, sleep_until, history_open, history_write, coupling_steps, print_summary

  interface
    integer(c_int) function c_usleep(usec) bind(C, name='usleep')
      import :: c_int
      integer(c_int), value :: usec
    end function
  end interface

  ! Seconds of wall time over the steps so far, and the part of them spent
  ! exchanging with the other codes (waiting included).
  type :: stopwatch
    real(real64) :: total = 0, exchange = 0
    integer :: steps = 0
  end type stopwatch

contains

  ! Wall-clock seconds from an arbitrary origin.
  real(real64) function now()
    integer(int64) :: count, rate
    call system_clock(count, rate)
    now = real(count, real64) / real(rate, real64)
  end function now

  ! Sleeps until now() reaches `t`.
  subroutine sleep_until(t)
    real(real64), intent(in) :: t
    integer(c_int) :: ignored
    do while (now() < t)
      ignored = c_usleep(int(min(1.0e5_real64, max(1.0_real64, 1.0e6_real64 * (t - now()))), c_int))
    end do
  end subroutine sleep_until

  integer function history_open(file, header) result(unit)
    character(len=*), intent(in) :: file, header
    open (newunit=unit, file=file, status='replace', action='write')
    write (unit, '(a)') '# ' // header
  end function history_open

  ! One line: the step, then every value with 17 significant digits.
  subroutine history_write(unit, step, values)
    integer, intent(in) :: unit, step
    real(real64), intent(in) :: values(:)
    write (unit, '(i6, *(1x, es24.16e3))') step, values
    flush (unit)
  end subroutine history_write

  ! The first value of s1.dat: ITERmax, the number of coupling steps.
  integer function coupling_steps()
    integer :: unit
    open (newunit=unit, file='s1.dat', status='old', action='read')
    read (unit, *) coupling_steps
    close (unit)
  end function coupling_steps

  ! "<code>: N coupling steps, X ms per step (exchange Y ms)", where the
  ! exchange time is the largest over the ranks that report theirs.
  subroutine print_summary(code, w, exchange)
    character(len=*), intent(in) :: code
    type(stopwatch), intent(in) :: w
    real(real64), intent(in) :: exchange
    if (w%steps == 0) return
    write (*, '(a, ": ", i0, " coupling steps, ", f8.3, " ms per step (exchange ", f8.3, " ms)")') &
      code, w%steps, 1000 * w%total / w%steps, 1000 * exchange / w%steps
  end subroutine print_summary
end module heat3d_report
