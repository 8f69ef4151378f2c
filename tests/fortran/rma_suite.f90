! One-sided operations from Fortran (DESIGN 3.7, 3.10) between every
! process of a universe of two programs (any size of 3 or more), over
! TETHER_COMM_UNIVERSE:
!   - windows of different sizes per rank (rank 1's counter window is
!     0 bytes); put and get of real(real64) checked after a flush, by the
!     target after a fence, and rput/rget of a 2-D array with integer(8)
!     counts and offsets;
!   - accumulate SUM on DOUBLE_PRECISION and INT64 from every rank into
!     rank 0;
!   - NFETCH fetch_and_op SUM per rank on one counter: final value exact,
!     every fetched value distinct; TETHER_NO_OP reads it; a
!     compare_and_swap that exactly one rank wins;
!   - out-of-window accesses refused with TETHER_ERR_RMA_RANGE and the
!     target's memory untouched, an invalid (type, op) pair refused with
!     TETHER_ERR_OP, a freed window with TETHER_ERR_ARG.
! Each process prints "ok fortran rma" when all its checks passed; any
! failure stops it with exit 1.
program rma_suite
  use, intrinsic :: iso_fortran_env, only: int64, real64
  use tether
  use checks
  implicit none

  integer, parameter :: NFETCH = 50
  ! Sentinel every window element starts with.
  real(real64), parameter :: UNTOUCHED = -7.0_real64
  integer :: ierr, me, n, next, prev, win, cwin
  real(real64), allocatable, target :: w(:)
  integer(int64), allocatable, target :: c(:)

  call tether_init(ierr)
  call check(ierr, 'tether_init')
  call tether_comm_rank(TETHER_COMM_UNIVERSE, me, ierr)
  call check(ierr, 'comm_rank')
  call tether_comm_size(TETHER_COMM_UNIVERSE, n, ierr)
  call check(ierr, 'comm_size')
  call expect(n >= 3, 'at least 3 processes')
  next = mod(me + 1, n)
  prev = mod(me - 1 + n, n)

  ! Window sizes differ per rank: 16 + 2 * rank doubles; counters: 4
  ! int64 except on rank 1 (0 bytes).
  allocate (w(window_elements(me)))
  w = UNTOUCHED
  call tether_win_create(w, size(w) * 8_int64, TETHER_COMM_UNIVERSE, win, ierr)
  call check(ierr, 'win_create')
  allocate (c(merge(0, 4, me == 1)))
  c = 0
  call tether_win_create(c, 8 * size(c), TETHER_COMM_UNIVERSE, cwin, ierr)
  call check(ierr, 'win_create of the counters')

  call put_and_get()
  call accumulate_sum()
  call counter_and_cas()
  call out_of_range()

  call tether_win_free(win, ierr)
  call check(ierr, 'win_free')
  call expect(win == TETHER_WIN_NULL, 'win_free sets TETHER_WIN_NULL')
  call tether_put(1.0_real64, 1, TETHER_DOUBLE_PRECISION, next, 0, win, ierr)
  call expect_code(ierr, TETHER_ERR_ARG, 'put on a freed window')
  call tether_win_free(cwin, ierr)
  call check(ierr, 'win_free of the counters')
  call tether_finalize(ierr)
  call check(ierr, 'tether_finalize')
  print '("ok fortran rma")'

contains

  pure integer function window_elements(rank)
    integer, intent(in) :: rank
    window_elements = 16 + 2 * rank
  end function window_elements

  pure real(real64) function value(origin, k)
    integer, intent(in) :: origin, k
    value = origin * 100 + k + 0.25_real64
  end function value

  subroutine put_and_get()
    real(real64), target :: out(8), back(8), square(2, 2), square_back(2, 2)
    integer :: k, req
    ! Elements 1..8 of `next` are written by this process only: put, flush,
    ! get, flush, and the bytes read back are the bytes put.
    out = [(value(me, k), k = 1, 8)]
    back = 0
    call tether_put(out, size(out), TETHER_DOUBLE_PRECISION, next, 0, win, ierr)
    call check(ierr, 'put')
    call tether_win_flush(next, win, ierr)
    call check(ierr, 'flush after put')
    call tether_get(back, 8_int64, TETHER_DOUBLE_PRECISION, next, 0_int64, win, ierr)
    call check(ierr, 'get')
    call tether_win_flush_all(win, ierr)
    call check(ierr, 'flush_all after get')
    call expect(all(back == out), 'get after flush returns what put wrote')

    ! Elements 9..12, a 2-D array, by request with integer(8) count and
    ! offset; the target checks them after the fence.
    square = reshape([(value(me, 8 + k), k = 1, 4)], [2, 2])
    call tether_rput(square, 4_int64, TETHER_DOUBLE_PRECISION, next, 8_int64 * 8, win, req, ierr)
    call check(ierr, 'rput')
    call tether_wait(req, TETHER_STATUS_IGNORE, ierr)
    call check(ierr, 'wait rput')
    call tether_win_fence(win, ierr)
    call check(ierr, 'fence after put')
    call expect(all(w(1:8) == [(value(prev, k), k = 1, 8)]), 'the put from prev after the fence')
    call expect(all(w(9:12) == [(value(prev, 8 + k), k = 1, 4)]), 'the rput from prev after the fence')
    call expect(all(w(13:) == UNTOUCHED), 'the rest of the window untouched')

    call tether_rget(square_back, 4, TETHER_DOUBLE_PRECISION, next, 64, win, req, ierr)
    call check(ierr, 'rget')
    call tether_wait(req, TETHER_STATUS_IGNORE, ierr)
    call check(ierr, 'wait rget')
    call expect(all(square_back == square), 'rget returns the 2-D array rput wrote')
    call tether_win_fence(win, ierr)
    call check(ierr, 'fence after rget')
  end subroutine put_and_get

  subroutine accumulate_sum()
    real(real64), target :: d(2)
    integer(int64), target :: i
    integer :: r
    ! Every rank into rank 0's w(13:14) (it starts at UNTOUCHED) and c(2).
    d = [real(me + 1, real64), 0.5_real64 * (me + 1)]
    i = 1000_int64 * (me + 1)
    call tether_accumulate(d, 2, TETHER_DOUBLE_PRECISION, 0, 12 * 8, TETHER_SUM, win, ierr)
    call check(ierr, 'accumulate DOUBLE_PRECISION')
    call tether_accumulate(i, 1_int64, TETHER_INT64, 0, 8_int64, TETHER_SUM, cwin, ierr)
    call check(ierr, 'accumulate INT64')
    call tether_win_fence(win, ierr)
    call check(ierr, 'fence after accumulate')
    call tether_win_fence(cwin, ierr)
    call check(ierr, 'fence of the counters after accumulate')
    if (me == 0) then
      r = n * (n + 1) / 2
      call expect(w(13) == UNTOUCHED + r .and. w(14) == UNTOUCHED + 0.5_real64 * r, 'accumulated doubles')
      call expect(c(2) == 1000_int64 * r, 'accumulated int64')
    end if
  end subroutine accumulate_sum

  subroutine counter_and_cas()
    integer(int64), target :: one, fetched(NFETCH), all_fetched(NFETCH * n), now, mine, expected, old
    integer :: k, owner, won, wins
    ! NFETCH increments of the counter c(1) on the last rank from everyone.
    owner = n - 1
    one = 1
    do k = 1, NFETCH
      call tether_fetch_and_op(one, fetched(k), TETHER_INT64, owner, 0, TETHER_SUM, cwin, ierr)
      call check(ierr, 'fetch_and_op')
      call tether_win_flush(owner, cwin, ierr)
      call check(ierr, 'flush after fetch_and_op')
    end do
    call tether_allgather(fetched, NFETCH, TETHER_INT64, all_fetched, NFETCH, TETHER_INT64, &
                          TETHER_COMM_UNIVERSE, ierr)
    call check(ierr, 'allgather of the fetched values')
    call expect(distinct_range(all_fetched), 'every fetched value distinct, 0 to NFETCH * n - 1')
    call tether_win_fence(cwin, ierr)
    call check(ierr, 'fence after fetch_and_op')
    if (me == owner) call expect(c(1) == NFETCH * n, 'the counter after every increment')
    now = -1
    call tether_fetch_and_op(one, now, TETHER_INT64, owner, 0_int64, TETHER_NO_OP, cwin, ierr)
    call check(ierr, 'fetch_and_op NO_OP')
    call tether_win_flush(owner, cwin, ierr)
    call check(ierr, 'flush after NO_OP')
    call expect(now == NFETCH * n, 'NO_OP reads the counter')

    ! c(3) of rank 0 is 0: exactly one rank swaps in its rank + 1.
    mine = me + 1
    expected = 0
    old = -1
    call tether_compare_and_swap(mine, expected, old, TETHER_INT64, 0, 16, cwin, ierr)
    call check(ierr, 'compare_and_swap')
    call tether_win_flush(0, cwin, ierr)
    call check(ierr, 'flush after compare_and_swap')
    won = merge(1, 0, old == 0)
    call expect(old == 0 .or. (old >= 1 .and. old <= n), 'compare_and_swap fetched 0 or a rank + 1')
    call tether_allreduce(won, wins, 1, TETHER_INTEGER, TETHER_SUM, TETHER_COMM_UNIVERSE, ierr)
    call check(ierr, 'allreduce of the winners')
    call expect(wins == 1, 'exactly one compare_and_swap won')
    call tether_win_fence(cwin, ierr)
    call check(ierr, 'fence after compare_and_swap')
    if (me == 0) call expect(c(3) >= 1 .and. c(3) <= n, 'a rank + 1 in the lock word')
  end subroutine counter_and_cas

  logical function distinct_range(values)
    integer(int64), intent(in) :: values(:)
    logical :: seen(0:size(values) - 1)
    integer :: k
    seen = .false.
    distinct_range = .false.
    do k = 1, size(values)
      if (values(k) < 0 .or. values(k) >= size(values)) return
      if (seen(values(k))) return
      seen(values(k)) = .true.
    end do
    distinct_range = .true.
  end function distinct_range

  subroutine out_of_range()
    real(real64), target :: out(8)
    integer(int64), target :: v, r
    integer(int64) :: last
    integer :: req
    out = 99
    v = 1
    last = 8_int64 * window_elements(next)
    ! The last 8 doubles shifted one byte past the end, a negative offset,
    ! a get past the end, a misaligned and an empty-window atomic.
    call tether_put(out, 8, TETHER_DOUBLE_PRECISION, next, last - 63, win, ierr)
    call expect_code(ierr, TETHER_ERR_RMA_RANGE, 'put one byte past the end')
    call tether_put(out, 1, TETHER_DOUBLE_PRECISION, next, -8, win, ierr)
    call expect_code(ierr, TETHER_ERR_RMA_RANGE, 'put at a negative offset')
    call tether_get(out, 2_int64, TETHER_DOUBLE_PRECISION, next, last - 8, win, ierr)
    call expect_code(ierr, TETHER_ERR_RMA_RANGE, 'get past the end')
    call tether_rput(out, 8, TETHER_DOUBLE_PRECISION, next, last, win, req, ierr)
    if (ierr == TETHER_SUCCESS) call tether_wait(req, TETHER_STATUS_IGNORE, ierr)
    call expect_code(ierr, TETHER_ERR_RMA_RANGE, 'rput at the end')
    call tether_fetch_and_op(v, r, TETHER_INT64, 0, 4, TETHER_SUM, cwin, ierr)
    call expect_code(ierr, TETHER_ERR_RMA_RANGE, 'misaligned fetch_and_op')
    call tether_fetch_and_op(v, r, TETHER_INT64, 1, 0, TETHER_SUM, cwin, ierr)
    call expect_code(ierr, TETHER_ERR_RMA_RANGE, 'fetch_and_op into an empty window')
    call tether_accumulate(out, 2, TETHER_DOUBLE_PRECISION, next, 0, TETHER_BAND, win, ierr)
    call expect_code(ierr, TETHER_ERR_OP, 'BAND on DOUBLE_PRECISION')
    ! A zero-length access at the end is legal.
    call tether_put(out, 0, TETHER_DOUBLE_PRECISION, next, last, win, ierr)
    call check(ierr, 'zero-length put at the end')
    call tether_win_fence(win, ierr)
    call check(ierr, 'fence after the refused accesses')
    call expect(all(w(15:) == UNTOUCHED), 'the window untouched by refused accesses')
  end subroutine out_of_range
end program rma_suite
