! Fields from Fortran (tests/test_fortran.py): program "prod" (4 ranks, a
! 2x2 BLOCK grid in Fortran order) puts a 2-D double field of 13 x 10
! every step; "cons" (3 ranks, BLOCK_CYCLIC(2) rows x NONE, C order: data
! arrive by logical index, transposed) gets it with blocking and
! non-blocking calls, and checks every element: value(i, j) at step s is
! s*1e6 + i*1000 + j for 0-based global indices. Also: a mode mismatch of
! the modes' names, a wrong step, and the local shapes.
program field_suite
  use tether
  use checks
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  integer(int64), parameter :: n(2) = [13_int64, 10_int64]
  integer :: ierr, id, rank, size, dist, field, req, step, grid(2), kinds(2), order
  integer :: c(2), d, i, j
  integer(int64) :: blocks(2), local(2), s
  character(len=TETHER_MAX_PROGRAM_NAME) :: me
  logical :: producer
  real(real64), allocatable, target :: a(:, :), b(:, :)
  integer(int64), allocatable :: gi(:), gj(:)

  call tether_init(ierr); call check(ierr, "init")
  call tether_program_id(id, ierr); call check(ierr, "program_id")
  call tether_program_rank(rank, ierr); call check(ierr, "program_rank")
  call tether_program_size(id, size, ierr); call check(ierr, "program_size")
  call tether_program_name(id, me, ierr); call check(ierr, "program_name")
  producer = trim(me) == "prod"
  blocks = [2_int64, 0_int64]
  if (producer) then
    grid = [2, 2]; kinds = [TETHER_DIST_BLOCK, TETHER_DIST_BLOCK]; order = TETHER_ORDER_FORTRAN
    c = [mod(rank, 2), rank / 2]
  else
    grid = [3, 1]; kinds = [TETHER_DIST_BLOCK_CYCLIC, TETHER_DIST_NONE]; order = TETHER_ORDER_C
    c = [rank, 0]
  end if
  call tether_dist_create(2, n, grid, kinds, blocks, order, dist, ierr); call check(ierr, "dist_create")
  call tether_dist_local_shape(dist, local, ierr); call check(ierr, "dist_local_shape")

  ! Global indices of the local rows and columns, by the same rules.
  allocate (gi(local(1)), gj(local(2)))
  do d = 1, 2
    do i = 1, int(local(d))
      if (kinds(d) == TETHER_DIST_BLOCK) then
        s = (n(d) + grid(d) - 1) / grid(d)
        s = c(d) * s + i - 1
      else if (kinds(d) == TETHER_DIST_NONE) then
        s = i - 1
      else
        s = ((int(i - 1, int64) / blocks(d)) * grid(d) + c(d)) * blocks(d) + mod(int(i - 1, int64), blocks(d))
      end if
      if (d == 1) gi(i) = s
      if (d == 2) gj(i) = s
    end do
  end do

  ! Fortran-order storage on the producer; the consumer's C-order local
  ! part is held as its transpose (last index fastest).
  if (producer) then
    allocate (a(local(1), local(2)), b(local(1), local(2)))
    call tether_field_create("heat", TETHER_DOUBLE_PRECISION, dist, "cons", TETHER_FIELD_MODE_PUT, field, ierr)
  else
    allocate (a(local(2), local(1)), b(local(2), local(1)))
    call tether_field_create("heat", TETHER_DOUBLE, dist, "prod", TETHER_FIELD_MODE_GET, field, ierr)
  end if
  call check(ierr, "field_create")
  call tether_dist_free(dist, ierr); call check(ierr, "dist_free")
  call expect(dist == TETHER_DIST_NULL, "a freed dist to be TETHER_DIST_NULL")

  if (.not. producer) then
    call tether_field_get(field, 5_int64, a, ierr)
    call expect_code(ierr, TETHER_ERR_ARG, "a get of a step that is not next")
  end if
  do step = 0, 9
    if (producer) then
      do j = 1, int(local(2))
        do i = 1, int(local(1))
          a(i, j) = value(step, gi(i), gj(j))
        end do
      end do
      if (mod(step, 2) == 0) then
        call tether_field_put(field, int(step, int64), a, ierr); call check(ierr, "field_put")
      else
        b = a
        call tether_field_iput(field, int(step, int64), b, req, ierr); call check(ierr, "field_iput")
        call tether_wait(req, TETHER_STATUS_IGNORE, ierr); call check(ierr, "wait iput")
      end if
    else
      a = -1
      if (mod(step, 2) == 0) then
        call tether_field_get(field, int(step, int64), a, ierr); call check(ierr, "field_get")
      else
        call tether_field_iget(field, int(step, int64), a, req, ierr); call check(ierr, "field_iget")
        call tether_wait(req, TETHER_STATUS_IGNORE, ierr); call check(ierr, "wait iget")
      end if
      do i = 1, int(local(1))
        do j = 1, int(local(2))
          if (a(j, i) /= value(step, gi(i), gj(j))) then
            write (*, '("step ", i0, " element (", i0, ",", i0, "): ", f0.1)') step, gi(i), gj(j), a(j, i)
            error stop 1
          end if
        end do
      end do
    end if
  end do
  call tether_field_free(field, ierr); call check(ierr, "field_free")
  call expect(field == TETHER_FIELD_NULL, "a freed field to be TETHER_FIELD_NULL")
  write (*, '("ok fortran fields")')
  call tether_finalize(ierr); call check(ierr, "finalize")

contains

  pure real(real64) function value(step, i, j)
    integer, intent(in) :: step
    integer(int64), intent(in) :: i, j
    value = real(step, real64) * 1.0e6_real64 + real(i * 1000 + j, real64)
  end function value

end program field_suite
