! The trace test's Fortran program: the scenario of tests/c/trace_peers.c
! (every process exchanges 8 doubles with every process of the other
! programs, `rounds` times; program `late` sleeps before sending; then an
! allreduce over the universe).
! usage: trace_peers ROUNDS LATE DELAY_MS
program trace_peers
  use, intrinsic :: iso_fortran_env, only: real64, int64
  use tether
  use checks
  implicit none
  integer :: ierr, rounds, delay_ms, me, n, id, rank, nprocs, first, round, q, k, i
  character(len=TETHER_MAX_PROGRAM_NAME) :: name
  character(len=64) :: arg, late
  real(real64), allocatable :: inbox(:, :)
  real(real64) :: outbox(8), one(1), total(1)
  integer, allocatable :: reqs(:)
  integer(int64) :: t0, t1, rate

  call tether_init(ierr); call check(ierr, 'tether_init')
  call get_command_argument(1, arg); read (arg, *) rounds
  call get_command_argument(2, late)
  call get_command_argument(3, arg); read (arg, *) delay_ms
  call tether_universe_rank(me, ierr); call check(ierr, 'universe_rank')
  call tether_universe_size(n, ierr); call check(ierr, 'universe_size')
  call tether_program_id(id, ierr); call check(ierr, 'program_id')
  call tether_program_rank(rank, ierr); call check(ierr, 'program_rank')
  call tether_program_size(id, nprocs, ierr); call check(ierr, 'program_size')
  call tether_program_name(id, name, ierr); call check(ierr, 'program_name')
  first = me - rank
  allocate (inbox(8, 0:n - 1), reqs(2 * n))
  do round = 0, rounds - 1
    k = 0
    do q = 0, n - 1
      if (q >= first .and. q < first + nprocs) cycle
      k = k + 1
      call tether_irecv(inbox(:, q), 8, TETHER_DOUBLE_PRECISION, q, round * 1000 + q, TETHER_COMM_UNIVERSE, &
          reqs(k), ierr)
      call check(ierr, 'irecv')
    end do
    if (trim(name) == trim(late)) then
      call system_clock(t0, rate)
      do
        call system_clock(t1)
        if ((t1 - t0) * 1000 >= int(delay_ms, int64) * rate) exit
      end do
    end if
    outbox = [(real(me * 100 + round + i, real64), i = 0, 7)]
    do q = 0, n - 1
      if (q >= first .and. q < first + nprocs) cycle
      k = k + 1
      call tether_isend(outbox, 8, TETHER_DOUBLE_PRECISION, q, round * 1000 + me, TETHER_COMM_UNIVERSE, reqs(k), ierr)
      call check(ierr, 'isend')
    end do
    call tether_waitall(k, reqs, TETHER_STATUSES_IGNORE, ierr); call check(ierr, 'waitall')
    do q = 0, n - 1
      if (q >= first .and. q < first + nprocs) cycle
      if (inbox(8, q) /= real(q * 100 + round + 7, real64)) error stop 'wrong data'
    end do
  end do
  one = 1
  call tether_allreduce(one, total, 1, TETHER_DOUBLE_PRECISION, TETHER_SUM, TETHER_COMM_UNIVERSE, ierr)
  call check(ierr, 'allreduce')
  if (total(1) /= n) error stop 'allreduce'
  write (*, '("ok trace ", a, ":", i0)') trim(name), rank
  call tether_finalize(ierr); call check(ierr, 'finalize')
end program trace_peers
