! Code-1, file-coupled: a point source. Reads s1.dat (ITERmax, Period,
! Interval, Val) and every Interval publishes (time, Source) with
! Source = Val*sin(time*coef) in s1.out for Code-2.
!
!   code1 [wallclock] time is the wall clock (the original)
!   code1 steps       time is step * Interval (deterministic)
program code1
  use, intrinsic :: iso_fortran_env, only: real64
  use mailbox, only: post
  use heat3d_report
  implicit none
  integer :: ITERmax, iter
  real(real64) :: Period, Interval, Val, coef, time, Source, start, t0
  character(len=16) :: mode
  type(stopwatch) :: w

  call get_command_argument(1, mode)
  if (mode /= '' .and. mode /= 'steps' .and. mode /= 'wallclock') error stop 'usage: code1 [steps|wallclock]'
  open (11, file='s1.dat', status='old', action='read')
  read (11, *) ITERmax
  read (11, *) Period
  read (11, *) Interval
  read (11, *) Val
  close (11)
  coef = 2 * acos(-1.0_real64) / Period

  start = now()
  do iter = 1, ITERmax
    if (mode == 'steps') then
      time = iter * Interval
    else
      call sleep_until(start + iter * Interval)
      time = now() - start
    end if
    t0 = now()
    Source = Val * sin(time * coef)
    call post('s1.out', iter, [time, Source])
    w%exchange = w%exchange + (now() - t0)
    w%total = w%total + (now() - t0)
    w%steps = iter
    write (*, '("step ", i3, "  time ", f7.4, "  source ", f9.4)') iter, time, Source
  end do
  call print_summary('code1', w, w%exchange)
end program code1
