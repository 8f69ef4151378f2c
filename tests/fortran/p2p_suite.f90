! Point to point from Fortran between every process of a universe (any
! size of 2 or more): scalars and 1-D and 3-D arrays of every intrinsic
! type, integer and integer(8) counts, statuses, wildcards, probe, test,
! waitany, truncation and bad arguments reaching ierr. Each process prints
! "ok p2p" when all its checks passed; any failure stops it with exit 1.
program p2p_suite
  use, intrinsic :: iso_fortran_env, only: int64, real32, real64
  use tether
  use checks
  implicit none

  ! One message of each shape and kind, filled from the sender's rank.
  type :: payload
    integer :: i
    real(real64) :: ttt
    real(real32) :: r(10)
    real(real64) :: d(3, 4, 5)
    complex(real32) :: c(7)
    complex(real64) :: z(2, 3, 2)
    integer :: a(2, 3, 4)
    logical :: l(5)
    character(len=16) :: s
  end type payload

  integer :: ierr, me, n, next, prev
  logical :: joined

  call tether_initialized(joined, ierr)
  call check(ierr, 'tether_initialized before init')
  call expect(.not. joined, 'not initialized before tether_init')
  call tether_universe_rank(me, ierr)
  call expect_code(ierr, TETHER_ERR_NOT_INITIALIZED, 'tether_universe_rank before tether_init')
  call tether_init(ierr)
  call check(ierr, 'tether_init')
  call tether_universe_rank(me, ierr)
  call check(ierr, 'tether_universe_rank')
  call tether_universe_size(n, ierr)
  call check(ierr, 'tether_universe_size')
  next = mod(me + 1, n)
  prev = mod(me - 1 + n, n)

  call identity()
  call ring_of_every_kind()
  call star_blocking_with_wildcards()
  call probe_test_waitany()
  call truncation()
  call bad_arguments()

  call tether_finalize(ierr)
  call check(ierr, 'tether_finalize')
  print '("ok p2p")'

contains

  subroutine fill(rank, p)
    integer, intent(in) :: rank
    type(payload), intent(out) :: p
    integer :: i
    p%i = 1000 * rank + 7
    p%ttt = 0.1_real64 * rank
    p%r = [(real(rank * 100 + i, real32) / 4, i = 1, 10)]
    p%d = reshape([(real(rank, real64) + i / 64.0_real64, i = 1, 60)], shape(p%d))
    p%c = [(cmplx(rank, -i, real32), i = 1, 7)]
    p%z = reshape([(cmplx(rank * 0.5_real64, i * 0.25_real64, real64), i = 1, 12)], shape(p%z))
    p%a = reshape([(rank * 1000 - i, i = 1, 24)], shape(p%a))
    p%l = [(mod(rank + i, 2) == 0, i = 1, 5)]
    write (p%s, '("from rank ", i0)') rank
  end subroutine fill

  subroutine identity()
    integer :: count, id, rank, size, found, u, first, p, r, psize
    character(len=TETHER_MAX_PROGRAM_NAME) :: name
    call tether_program_count(count, ierr)
    call check(ierr, 'tether_program_count')
    call tether_program_id(id, ierr)
    call check(ierr, 'tether_program_id')
    call tether_program_rank(rank, ierr)
    call check(ierr, 'tether_program_rank')
    call tether_program_size(id, size, ierr)
    call check(ierr, 'tether_program_size')
    call tether_program_name(id, name, ierr)
    call check(ierr, 'tether_program_name')
    call tether_program_find(trim(name), found, ierr)
    call check(ierr, 'tether_program_find')
    call expect(found == id .and. rank < size .and. id < count, 'consistent program identity')
    call tether_program_universe_rank(id, rank, u, ierr)
    call check(ierr, 'tether_program_universe_rank')
    call expect(u == me, 'tether_program_universe_rank of my own program and rank')
    first = 0
    do p = 0, count - 1
      call tether_program_size(p, psize, ierr)
      call check(ierr, 'tether_program_size')
      do r = 0, psize - 1
        call tether_program_universe_rank(p, r, u, ierr)
        call check(ierr, 'tether_program_universe_rank')
        call expect(u == first + r, 'universe ranks: programs by name, ranks concatenated')
      end do
      call tether_program_universe_rank(p, psize, u, ierr)
      call expect_code(ierr, TETHER_ERR_RANK, 'tether_program_universe_rank past the last rank')
      first = first + psize
    end do
    call tether_program_universe_rank(count, 0, u, ierr)
    call expect_code(ierr, TETHER_ERR_ARG, 'tether_program_universe_rank of an unknown program id')
    print '("identity ", a, " rank ", i0, " universe ", i0, " of ", i0)', trim(name), rank, me, n
  end subroutine identity

  ! Each process sends one payload to the next and receives the previous
  ! one's, every field a message of its own, with isend/irecv/waitall.
  subroutine ring_of_every_kind()
    type(payload), target :: out, in, want
    integer :: reqs(18), statuses(TETHER_STATUS_SIZE, 18), k
    integer(int64) :: count
    call fill(me, out)
    call fill(prev, want)
    call tether_irecv(in%i, 1, TETHER_INTEGER, prev, 1, TETHER_COMM_UNIVERSE, reqs(1), ierr)
    call check(ierr, 'irecv integer scalar')
    call tether_irecv(in%ttt, 1, TETHER_DOUBLE_PRECISION, prev, 2, TETHER_COMM_UNIVERSE, reqs(2), ierr)
    call tether_irecv(in%r, size(in%r), TETHER_REAL, prev, 3, TETHER_COMM_UNIVERSE, reqs(3), ierr)
    call tether_irecv(in%d, size(in%d), TETHER_DOUBLE_PRECISION, prev, 4, TETHER_COMM_UNIVERSE, reqs(4), ierr)
    call tether_irecv(in%c, size(in%c), TETHER_COMPLEX, prev, 5, TETHER_COMM_UNIVERSE, reqs(5), ierr)
    call tether_irecv(in%z, size(in%z), TETHER_DOUBLE_COMPLEX, prev, 6, TETHER_COMM_UNIVERSE, reqs(6), ierr)
    call tether_irecv(in%a, size(in%a, kind=int64), TETHER_INTEGER, prev, 7, TETHER_COMM_UNIVERSE, reqs(7), ierr)
    call tether_irecv(in%l, size(in%l), TETHER_LOGICAL, prev, 8, TETHER_COMM_UNIVERSE, reqs(8), ierr)
    call tether_irecv(in%s, len(in%s), TETHER_CHARACTER, prev, 9, TETHER_COMM_UNIVERSE, reqs(9), ierr)
    call check(ierr, 'irecv')
    call tether_isend(out%i, 1, TETHER_INTEGER, next, 1, TETHER_COMM_UNIVERSE, reqs(10), ierr)
    call tether_isend(out%ttt, 1_int64, TETHER_DOUBLE_PRECISION, next, 2, TETHER_COMM_UNIVERSE, reqs(11), ierr)
    call tether_isend(out%r, size(out%r), TETHER_REAL, next, 3, TETHER_COMM_UNIVERSE, reqs(12), ierr)
    call tether_isend(out%d, size(out%d), TETHER_DOUBLE_PRECISION, next, 4, TETHER_COMM_UNIVERSE, reqs(13), ierr)
    call tether_isend(out%c, size(out%c), TETHER_COMPLEX, next, 5, TETHER_COMM_UNIVERSE, reqs(14), ierr)
    call tether_isend(out%z, size(out%z), TETHER_DOUBLE_COMPLEX, next, 6, TETHER_COMM_UNIVERSE, reqs(15), ierr)
    call tether_isend(out%a, size(out%a, kind=int64), TETHER_INTEGER, next, 7, TETHER_COMM_UNIVERSE, reqs(16), ierr)
    call tether_isend(out%l, size(out%l), TETHER_LOGICAL, next, 8, TETHER_COMM_UNIVERSE, reqs(17), ierr)
    call tether_isend(out%s, len(out%s), TETHER_CHARACTER, next, 9, TETHER_COMM_UNIVERSE, reqs(18), ierr)
    call check(ierr, 'isend')
    call tether_waitall(18, reqs, statuses, ierr)
    call check(ierr, 'waitall')
    call expect(all(reqs == TETHER_REQUEST_NULL), 'waitall to reset every request')
    do k = 1, 9
      call expect(statuses(TETHER_SOURCE, k) == prev .and. statuses(TETHER_TAG, k) == k &
                  .and. statuses(TETHER_ERROR, k) == TETHER_SUCCESS, 'statuses of the ring receives')
    end do
    call tether_get_count(statuses(:, 4), TETHER_DOUBLE_PRECISION, count, ierr)
    call check(ierr, 'get_count')
    call expect(count == 60, '60 double precision elements in the 3-D message')
    call expect(in%i == want%i .and. in%ttt == want%ttt, 'the scalars')
    call expect(all(in%r == want%r) .and. all(in%d == want%d), 'the real arrays')
    call expect(all(in%c == want%c) .and. all(in%z == want%z), 'the complex arrays')
    call expect(all(in%a == want%a) .and. all(in%l .eqv. want%l), 'the integer and logical arrays')
    call expect(in%s == want%s, 'the character string')
  end subroutine ring_of_every_kind

  ! Universe rank 0 sends a scalar to every other process with blocking
  ! calls; each answers with a 2-element array that rank 0 takes in any
  ! order (TETHER_ANY_SOURCE, TETHER_ANY_TAG).
  subroutine star_blocking_with_wildcards()
    real(real64) :: ttt
    integer :: pair(2), status(TETHER_STATUS_SIZE), k, seen(0:n - 1)
    if (me == 0) then
      do k = 1, n - 1
        ttt = 1.5_real64 * k
        call tether_send(ttt, 1, TETHER_DOUBLE_PRECISION, k, k, TETHER_COMM_UNIVERSE, ierr)
        call check(ierr, 'send ttt')
      end do
      seen = 0
      do k = 1, n - 1
        call tether_recv(pair, 2_int64, TETHER_INTEGER, TETHER_ANY_SOURCE, TETHER_ANY_TAG, &
                         TETHER_COMM_UNIVERSE, status, ierr)
        call check(ierr, 'recv from any source')
        call expect(pair(1) == status(TETHER_SOURCE) .and. pair(2) == pair(1)**2 &
                    .and. status(TETHER_TAG) == 100 + pair(1), 'answer matching its status')
        seen(pair(1)) = seen(pair(1)) + 1
      end do
      call expect(all(seen(1:) == 1), 'one answer from every other process')
    else
      call tether_recv(ttt, 1, TETHER_DOUBLE_PRECISION, 0, TETHER_ANY_TAG, TETHER_COMM_UNIVERSE, status, ierr)
      call check(ierr, 'recv ttt')
      call expect(ttt == 1.5_real64 * me .and. status(TETHER_TAG) == me, 'ttt and its tag')
      pair = [me, me * me]
      call tether_send(pair, 2, TETHER_INTEGER, 0, 100 + me, TETHER_COMM_UNIVERSE, ierr)
      call check(ierr, 'send answer')
    end if
    ! Later phases send on other tags; none may reach rank 0's wildcards.
    call tether_barrier(TETHER_COMM_UNIVERSE, ierr)
    call check(ierr, 'barrier')
  end subroutine star_blocking_with_wildcards

  ! probe and iprobe see the next message without taking it; test polls a
  ! receive to completion; waitany gives 1-based indices.
  subroutine probe_test_waitany()
    integer :: out(5), in(5), status(TETHER_STATUS_SIZE), reqs(2), index, count, k, req
    logical :: flag
    out = [(me * 10 + k, k = 1, 5)]
    call tether_isend(out, 5, TETHER_INTEGER, next, 50, TETHER_COMM_UNIVERSE, reqs(1), ierr)
    call check(ierr, 'isend for probe')
    call tether_probe(prev, 50, TETHER_COMM_UNIVERSE, status, ierr)
    call check(ierr, 'probe')
    call tether_get_count(status, TETHER_INTEGER, count, ierr)
    call check(ierr, 'get_count after probe')
    call expect(count == 5 .and. status(TETHER_SOURCE) == prev, 'probe to describe 5 integers from prev')
    flag = .false.
    do while (.not. flag)
      call tether_iprobe(prev, 50, TETHER_COMM_UNIVERSE, flag, TETHER_STATUS_IGNORE, ierr)
      call check(ierr, 'iprobe')
    end do
    call tether_irecv(in, 5, TETHER_INTEGER, prev, 50, TETHER_COMM_UNIVERSE, reqs(2), ierr)
    call check(ierr, 'irecv after probe')
    do k = 1, 2
      call tether_waitany(2, reqs, index, status, ierr)
      call check(ierr, 'waitany')
      call expect(index == 1 .or. index == 2, 'a 1-based waitany index')
      call expect(reqs(index) == TETHER_REQUEST_NULL, 'waitany to reset the request it completed')
    end do
    call tether_waitany(2, reqs, index, status, ierr)
    call expect(ierr == TETHER_SUCCESS .and. index == TETHER_UNDEFINED, 'TETHER_UNDEFINED with no active request')
    call expect(all(in == [(prev * 10 + k, k = 1, 5)]), 'the probed message')

    call tether_irecv(in, 5, TETHER_INTEGER, prev, 51, TETHER_COMM_UNIVERSE, req, ierr)
    call check(ierr, 'irecv for test')
    call tether_send(out, 5, TETHER_INTEGER, next, 51, TETHER_COMM_UNIVERSE, ierr)
    call check(ierr, 'send for test')
    flag = .false.
    do while (.not. flag)
      call tether_test(req, flag, status, ierr)
      call check(ierr, 'test')
    end do
    call expect(req == TETHER_REQUEST_NULL .and. status(TETHER_TAG) == 51, 'test to complete the receive')

    call tether_irecv(in, 5, TETHER_INTEGER, prev, 52, TETHER_COMM_UNIVERSE, reqs(1), ierr)
    call tether_isend(out, 5, TETHER_INTEGER, next, 52, TETHER_COMM_UNIVERSE, reqs(2), ierr)
    call check(ierr, 'isend and irecv for testall')
    flag = .false.
    do while (.not. flag)
      call tether_testall(2, reqs, flag, TETHER_STATUSES_IGNORE, ierr)
      call check(ierr, 'testall')
    end do
    call expect(all(reqs == TETHER_REQUEST_NULL), 'testall to complete both requests')

    call tether_irecv(in, 5, TETHER_INTEGER, prev, 999, TETHER_COMM_UNIVERSE, req, ierr)
    call check(ierr, 'irecv to cancel')
    call tether_cancel(req, ierr)
    call check(ierr, 'cancel')
    call tether_wait(req, status, ierr)
    call expect(status(TETHER_ERROR) == TETHER_ERR_CANCELLED, 'a cancelled receive''s status')
  end subroutine probe_test_waitany

  ! A message longer than the posted buffer: TETHER_ERR_TRUNCATE in ierr
  ! and in the status, with the true size; blocking and through waitall.
  subroutine truncation()
    real(real64) :: out(10), small(4)
    integer :: status(TETHER_STATUS_SIZE), statuses(TETHER_STATUS_SIZE, 1), req(1)
    integer(int64) :: count
    out = 1.0_real64
    call tether_send(out, 10, TETHER_DOUBLE_PRECISION, next, 60, TETHER_COMM_UNIVERSE, ierr)
    call check(ierr, 'send 10 doubles')
    call tether_recv(small, 4, TETHER_DOUBLE_PRECISION, prev, 60, TETHER_COMM_UNIVERSE, status, ierr)
    call expect_code(ierr, TETHER_ERR_TRUNCATE, 'recv of 10 into 4')
    call expect(status(TETHER_ERROR) == TETHER_ERR_TRUNCATE, 'the truncation in the status')
    call tether_get_count(status, TETHER_DOUBLE_PRECISION, count, ierr)
    call check(ierr, 'get_count of a truncated message')
    call expect(count == 10, 'the true size, 10 elements')

    call tether_send(out, 10, TETHER_DOUBLE_PRECISION, next, 61, TETHER_COMM_UNIVERSE, ierr)
    call check(ierr, 'send 10 doubles again')
    call tether_irecv(small, 2, TETHER_DOUBLE_PRECISION, prev, 61, TETHER_COMM_UNIVERSE, req(1), ierr)
    call check(ierr, 'irecv of 2')
    call tether_waitall(1, req, statuses, ierr)
    call expect_code(ierr, TETHER_ERR_TRUNCATE, 'waitall over a truncated receive')
    call expect(statuses(TETHER_ERROR, 1) == TETHER_ERR_TRUNCATE, 'the truncation in the statuses')
  end subroutine truncation

  ! Bad arguments come back as error classes, with a message.
  subroutine bad_arguments()
    real(real64) :: d(3, 4, 5), got(3, 4, 5)
    character(len=TETHER_MAX_ERROR_STRING) :: msg
    integer :: e, size, req, status(TETHER_STATUS_SIZE)
    d = 0
    d(2, 3, 4) = me + 0.5_real64
    got = -1
    call tether_send(d(1, :, :), 20, TETHER_DOUBLE_PRECISION, next, 70, TETHER_COMM_UNIVERSE, ierr)
    call expect_code(ierr, TETHER_ERR_ARG, 'send of a non-contiguous section')
    call tether_send(d, 60, TETHER_DOUBLE_PRECISION, n, 70, TETHER_COMM_UNIVERSE, ierr)
    call expect_code(ierr, TETHER_ERR_RANK, 'send to a rank outside the universe')
    call tether_last_error(msg, e)
    call check(e, 'last_error')
    call expect(len_trim(msg) > 0, 'a last error message after TETHER_ERR_RANK')
    ! TETHER_TAG_UB, the largest tag (huge(0): every non-negative default
    ! integer), travels; a negative tag is refused.
    call expect(TETHER_TAG_UB == huge(0), 'TETHER_TAG_UB is huge(0)')
    call tether_isend(d, 60, TETHER_DOUBLE_PRECISION, me, TETHER_TAG_UB, TETHER_COMM_UNIVERSE, req, ierr)
    call check(ierr, 'isend with tag TETHER_TAG_UB')
    call tether_recv(got, 60, TETHER_DOUBLE_PRECISION, me, TETHER_TAG_UB, TETHER_COMM_UNIVERSE, status, ierr)
    call check(ierr, 'recv with tag TETHER_TAG_UB')
    call expect(status(TETHER_TAG) == TETHER_TAG_UB .and. all(got == d), 'tag TETHER_TAG_UB: message and status')
    call tether_wait(req, status, ierr)
    call check(ierr, 'wait')
    call tether_send(d, 60, TETHER_DOUBLE_PRECISION, me, -huge(0) - 1, TETHER_COMM_UNIVERSE, ierr)
    call expect_code(ierr, TETHER_ERR_TAG, 'send with tag -huge(0) - 1')
    call tether_send(d, 60, 999, next, 70, TETHER_COMM_UNIVERSE, ierr)
    call expect_code(ierr, TETHER_ERR_TYPE, 'send with datatype 999')
    call tether_send(d, 60, TETHER_DOUBLE_PRECISION, next, 70, 12345, ierr)
    call expect_code(ierr, TETHER_ERR_COMM, 'send on communicator 12345')
    call tether_error_string(TETHER_ERR_TRUNCATE, msg, e)
    call check(e, 'error_string')
    call expect(index(msg, 'TRUNCATE') > 0, 'TRUNCATE in the name of TETHER_ERR_TRUNCATE')
    call tether_hint('NO_SUCH_HINT', '1', ierr)
    call expect_code(ierr, TETHER_ERR_UNKNOWN_HINT, 'an unknown hint')
    call tether_hint_get('EAGER_LIMIT', msg, ierr)
    call check(ierr, 'hint_get')
    call expect(verify(trim(msg), '0123456789') == 0 .and. len_trim(msg) > 0, 'a number for EAGER_LIMIT')
    call tether_kernel_begin(ierr)
    call check(ierr, 'kernel_begin')
    call tether_hint_get('IN_KERNEL', msg, ierr)
    call check(ierr, 'hint_get IN_KERNEL')
    call expect(trim(msg) == '1', 'IN_KERNEL 1 inside a kernel')
    call tether_kernel_end(ierr)
    call check(ierr, 'kernel_end')
    call tether_hint_get('IN_KERNEL', msg, ierr)
    call expect(trim(msg) == '0', 'IN_KERNEL 0 after the kernel')
    call tether_hint('MAX_LINKS', 'few', ierr)
    call expect_code(ierr, TETHER_ERR_HINT_VALUE, 'MAX_LINKS few')
    call tether_hint('MAX_LINKS', '4', ierr)
    call check(ierr, 'hint MAX_LINKS')
    call tether_hint_get('MAX_LINKS', msg, ierr)
    call expect(trim(msg) == '4', 'MAX_LINKS 4 read back')
    call tether_hint('MAX_LINKS', '0', ierr)
    call check(ierr, 'hint MAX_LINKS 0')
    call tether_type_size(TETHER_DOUBLE_PRECISION, size, ierr)
    call check(ierr, 'type_size')
    call expect(size == 8, 'an 8-byte double precision')
  end subroutine bad_arguments
end program p2p_suite
