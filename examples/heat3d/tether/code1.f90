! Code-1, Tether-coupled: a point source. Reads s1.dat (ITERmax, Period,
! Interval, Val) and every Interval sends (time, Source) with
! Source = Val*sin(time*coef) to rank 0 of Code-2. The file version
! (../file/code1.f90) with s1.out replaced by tether_isend/tether_waitall.
!
!   code1 [wallclock] time is the wall clock (the original)
!   code1 steps       time is step * Interval (deterministic)
program code1
  use, intrinsic :: iso_fortran_env, only: real64
  use tether
  use peers, only: universe_rank_of, check
  use heat3d_report
  implicit none
  integer :: ITERmax, iter, ierr, code2, req(1)
  real(real64) :: Period, Interval, Val, coef, time, Source, start, t0, ttt(2)
  character(len=16) :: mode
  type(stopwatch) :: w

  call get_command_argument(1, mode)
  if (mode /= '' .and. mode /= 'steps' .and. mode /= 'wallclock') error stop 'usage: code1 [steps|wallclock]'
  call tether_init(ierr)
  call check(ierr, 'tether_init')
  code2 = universe_rank_of('code2', 0)
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
    ttt = [time, Source]
    call tether_isend(ttt, 2, TETHER_DOUBLE_PRECISION, code2, iter, TETHER_COMM_UNIVERSE, req(1), ierr)
    call check(ierr, 'tether_isend')
    call tether_waitall(1, req, TETHER_STATUSES_IGNORE, ierr)
    call check(ierr, 'tether_waitall')
    w%exchange = w%exchange + (now() - t0)
    w%total = w%total + (now() - t0)
    w%steps = iter
    write (*, '("step ", i3, "  time ", f7.4, "  source ", f9.4)') iter, time, Source
  end do
  call print_summary('code1', w, w%exchange)
  call tether_finalize(ierr)
  call check(ierr, 'tether_finalize')
end program code1
