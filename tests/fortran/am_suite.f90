! Active messages from Fortran (DESIGN 3.7, 3.10) between every process of
! a universe of two programs (any size of 3 or more), over
! TETHER_COMM_UNIVERSE, with handlers as bind(C) module procedures:
!   - request/response: a request whose handler answers with
!     tether_am_send from inside (req comes back TETHER_REQUEST_NULL); a
!     blocking call and tether_progress from inside a handler give
!     TETHER_ERR_ARG; `ctx` reaches the handler;
!   - many messages: every rank sends every rank (itself too) NREP
!     messages of each of 0 B to 1 MiB of payload with a 2-integer
!     header; each is delivered exactly once with its bytes intact;
!   - a bad id and a negative length refused; an id unregistered with
!     C_NULL_FUNPTR.
! Each process prints "ok fortran am" when all its checks passed; any
! failure stops it with exit 1.
module am_handlers
  use, intrinsic :: iso_c_binding, only: c_ptr, c_int, c_size_t, c_f_pointer, c_associated
  use, intrinsic :: iso_fortran_env, only: int8, int32
  use tether
  implicit none

  integer, parameter :: NSIZES = 6, NREP = 4
  integer, parameter :: SIZES(NSIZES) = [0, 1, 100, 4096, 65536, 1048576]
  integer, parameter :: MAXRANKS = 64
  integer, save :: me = -1
  ! received(source, k, rep): deliveries of message (k, rep) from source.
  integer, save :: received(0:MAXRANKS - 1, NSIZES, NREP) = 0
  integer, save :: damaged = 0, answers = 0, answer = 0, refused = 0, wrong_ctx = 0

contains

  ! Byte i (from 1) of message k from `source`.
  pure integer(int8) function pattern(source, k, i)
    integer, intent(in) :: source, k, i
    pattern = int(mod(31 * i + 7 * source + k, 127), int8)
  end function pattern

  ! Id 7: the header is one integer; answers 3 times it with id 8, from
  ! inside. `ctx` points to the integer 42.
  subroutine on_request(ctx, source, header, header_len, payload, payload_len) bind(C)
    type(c_ptr), value :: ctx
    integer(c_int), value :: source
    type(c_ptr), value :: header
    integer(c_size_t), value :: header_len
    type(c_ptr), value :: payload
    integer(c_size_t), value :: payload_len
    integer(int32), pointer :: value, marker
    integer :: reply, req, ierr
    call c_f_pointer(ctx, marker)
    if (marker /= 42) wrong_ctx = wrong_ctx + 1
    if (header_len /= 4 .or. payload_len /= 0 .or. c_associated(payload)) damaged = damaged + 1
    call c_f_pointer(header, value)
    reply = 3 * value
    req = 99
    call tether_am_send(source, 8, reply, 4, reply, 0, TETHER_COMM_UNIVERSE, req, ierr)
    if (ierr /= TETHER_SUCCESS .or. req /= TETHER_REQUEST_NULL) damaged = damaged + 1
    call tether_barrier(TETHER_COMM_UNIVERSE, ierr)
    if (ierr == TETHER_ERR_ARG) refused = refused + 1
    call tether_progress(ierr)
    if (ierr == TETHER_ERR_ARG) refused = refused + 1
  end subroutine on_request

  ! Id 8: the answer.
  subroutine on_reply(ctx, source, header, header_len, payload, payload_len) bind(C)
    type(c_ptr), value :: ctx
    integer(c_int), value :: source
    type(c_ptr), value :: header
    integer(c_size_t), value :: header_len
    type(c_ptr), value :: payload
    integer(c_size_t), value :: payload_len
    integer(int32), pointer :: value
    if (c_associated(ctx) .or. source < 0 .or. header_len /= 4 .or. payload_len /= 0) damaged = damaged + 1
    if (c_associated(payload)) damaged = damaged + 1
    call c_f_pointer(header, value)
    answer = value
    answers = answers + 1
  end subroutine on_reply

  ! Id 5: the header is (k, rep); the payload SIZES(k) bytes of pattern.
  subroutine on_many(ctx, source, header, header_len, payload, payload_len) bind(C)
    type(c_ptr), value :: ctx
    integer(c_int), value :: source
    type(c_ptr), value :: header
    integer(c_size_t), value :: header_len
    type(c_ptr), value :: payload
    integer(c_size_t), value :: payload_len
    integer(int32), pointer :: h(:)
    integer(int8), pointer :: bytes(:)
    integer :: k, rep, i
    if (c_associated(ctx) .or. header_len /= 8 .or. source < 0 .or. source >= MAXRANKS) then
      damaged = damaged + 1
      return
    end if
    call c_f_pointer(header, h, [2])
    k = h(1)
    rep = h(2)
    if (k < 1 .or. k > NSIZES .or. rep < 1 .or. rep > NREP) then
      damaged = damaged + 1
      return
    end if
    if (payload_len /= int(SIZES(k), c_size_t)) then
      damaged = damaged + 1
    else if (payload_len == 0) then
      if (c_associated(payload)) damaged = damaged + 1
    else
      call c_f_pointer(payload, bytes, [payload_len])
      do i = 1, SIZES(k)
        if (bytes(i) /= pattern(source, k, i)) then
          damaged = damaged + 1
          exit
        end if
      end do
    end if
    received(source, k, rep) = received(source, k, rep) + 1
  end subroutine on_many
end module am_handlers

program am_suite
  use, intrinsic :: iso_c_binding, only: c_loc, c_null_ptr, c_null_funptr
  use, intrinsic :: iso_fortran_env, only: int8, int64
  use tether
  use checks
  use am_handlers
  implicit none

  integer :: ierr, n, next, req
  integer, target :: marker = 42

  call tether_init(ierr)
  call check(ierr, 'tether_init')
  call tether_comm_rank(TETHER_COMM_UNIVERSE, me, ierr)
  call check(ierr, 'comm_rank')
  call tether_comm_size(TETHER_COMM_UNIVERSE, n, ierr)
  call check(ierr, 'comm_size')
  call expect(n >= 3 .and. n <= MAXRANKS, '3 to 64 processes')
  next = mod(me + 1, n)

  call tether_am_register(7, on_request, c_loc(marker), ierr)
  call check(ierr, 'am_register 7')
  call tether_am_register(8, on_reply, c_null_ptr, ierr)
  call check(ierr, 'am_register 8')
  call tether_am_register(5, on_many, c_null_ptr, ierr)
  call check(ierr, 'am_register 5')
  call tether_barrier(TETHER_COMM_UNIVERSE, ierr)
  call check(ierr, 'barrier after registering')

  call request_response()
  call many_messages()
  call refusals()

  call tether_barrier(TETHER_COMM_UNIVERSE, ierr)
  call check(ierr, 'last barrier')
  write (*, '(a)') 'ok fortran am'
  call tether_finalize(ierr)
  call check(ierr, 'finalize')

contains

  subroutine request_response()
    integer :: value
    value = 100 + me
    call tether_am_send(next, 7, value, 4, value, 0_int64, TETHER_COMM_UNIVERSE, req, ierr)
    call check(ierr, 'am_send of the request')
    call tether_wait(req, TETHER_STATUS_IGNORE, ierr)
    call check(ierr, 'wait for the request')
    do while (answers == 0)
      call tether_progress(ierr)
      call check(ierr, 'progress')
    end do
    call expect(answer == 3 * value, 'the answer is 3 times the request')
    call tether_barrier(TETHER_COMM_UNIVERSE, ierr)
    call check(ierr, 'barrier after the answers')
    call expect(answers == 1, 'one answer')
    call expect(refused == 2, 'barrier and progress refused inside the handler')
    call expect(wrong_ctx == 0, 'ctx reaches the handler')
    call expect(damaged == 0, 'requests and answers intact')
  end subroutine request_response

  subroutine many_messages()
    integer(int8), allocatable, target :: payload(:)
    integer, target :: header(2)
    integer :: t, k, rep, i
    do t = 0, n - 1
      do k = 1, NSIZES
        allocate (payload(SIZES(k)))
        payload = [(pattern(me, k, i), i = 1, SIZES(k))]
        do rep = 1, NREP
          header = [k, rep]
          call tether_am_send(t, 5, header, 8, payload, SIZES(k), TETHER_COMM_UNIVERSE, req, ierr)
          call check(ierr, 'am_send of many')
          call tether_wait(req, TETHER_STATUS_IGNORE, ierr)
          call check(ierr, 'wait of many')
        end do
        deallocate (payload)
      end do
    end do
    do while (sum(received(0:n - 1, :, :)) < n * NSIZES * NREP)
      call tether_progress(ierr)
      call check(ierr, 'progress for many')
    end do
    call tether_barrier(TETHER_COMM_UNIVERSE, ierr)
    call check(ierr, 'barrier after many')
    call tether_progress(ierr)
    call check(ierr, 'progress after many')
    call expect(all(received(0:n - 1, :, :) == 1), 'every message delivered exactly once')
    call expect(all(received(n:, :, :) == 0), 'no message from a rank that does not exist')
    call expect(damaged == 0, 'every message intact')
  end subroutine many_messages

  subroutine refusals()
    integer :: one
    one = 1
    call tether_am_register(1024, on_many, c_null_ptr, ierr)
    call expect_code(ierr, TETHER_ERR_ARG, 'am_register of id 1024')
    call tether_am_send(next, -1, one, 4, one, 0, TETHER_COMM_UNIVERSE, req, ierr)
    call expect_code(ierr, TETHER_ERR_ARG, 'am_send to id -1')
    call tether_am_send(next, 5, one, -4, one, 0, TETHER_COMM_UNIVERSE, req, ierr)
    call expect_code(ierr, TETHER_ERR_COUNT, 'am_send of a negative header length')
    call tether_am_send(n, 5, one, 4, one, 0, TETHER_COMM_UNIVERSE, req, ierr)
    call expect_code(ierr, TETHER_ERR_RANK, 'am_send to a rank outside the communicator')
    call tether_am_register(9, on_many, c_null_ptr, ierr)
    call check(ierr, 'am_register 9')
    call tether_am_register(9, c_null_funptr, c_null_ptr, ierr)
    call check(ierr, 'am_register 9 with a null handler')
  end subroutine refusals
end program am_suite
