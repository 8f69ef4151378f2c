! The fields example's simulation: 4 ranks on a 2x2 BLOCK grid (Fortran
! order) advance a 2-D temperature field, a warm spot drifting across a
! cooling plate, and put it every step as field "temperature" to the
! programs `stats` and `viz`, which lay it out their own way.
program sim
  use tether
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  integer(int64), parameter :: n(2) = [96_int64, 64_int64]
  integer :: ierr, rank, dist, field, step, steps, i, j, c(2), argc
  integer(int64) :: local(2), first(2), blocks(2)
  real(real64), allocatable :: t(:, :)
  real(real64) :: x, y, cx, cy
  character(len=16) :: arg

  steps = 20
  argc = command_argument_count()
  if (argc >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) steps
  end if
  call tether_init(ierr); call stop_on(ierr, "init")
  call tether_program_rank(rank, ierr); call stop_on(ierr, "program_rank")
  blocks = 0
  call tether_dist_create(2, n, [2, 2], [TETHER_DIST_BLOCK, TETHER_DIST_BLOCK], blocks, &
      TETHER_ORDER_FORTRAN, dist, ierr); call stop_on(ierr, "dist_create")
  call tether_dist_local_shape(dist, local, ierr); call stop_on(ierr, "dist_local_shape")
  call tether_field_create("temperature", TETHER_DOUBLE_PRECISION, dist, "stats,viz", &
      TETHER_FIELD_MODE_PUT, field, ierr); call stop_on(ierr, "field_create")
  call tether_dist_free(dist, ierr)

  ! Fortran order: rank = c1 + 2*c2; BLOCK: coordinate c holds from c*ceil(n/2).
  c = [mod(rank, 2), rank / 2]
  first = c * ((n + 1) / 2)
  allocate (t(local(1), local(2)))
  do step = 0, steps - 1
    cx = 0.2_real64 + 0.6_real64 * step / max(steps - 1, 1)
    cy = 0.5_real64 + 0.25_real64 * sin(6.0_real64 * step / max(steps, 1))
    do j = 1, int(local(2))
      do i = 1, int(local(1))
        x = real(first(1) + i - 1, real64) / real(n(1) - 1, real64)
        y = real(first(2) + j - 1, real64) / real(n(2) - 1, real64)
        t(i, j) = 15.0_real64 + 60.0_real64 * exp(-((x - cx)**2 + (y - cy)**2) / 0.02_real64) &
            - 0.1_real64 * step
      end do
    end do
    call tether_field_put(field, int(step, int64), t, ierr); call stop_on(ierr, "field_put")
  end do
  call tether_field_free(field, ierr); call stop_on(ierr, "field_free")
  if (rank == 0) write (*, '("sim: put ", i0, " steps of a ", i0, "x", i0, " field")') steps, n(1), n(2)
  call tether_finalize(ierr)

contains

  subroutine stop_on(ierr, what)
    integer, intent(in) :: ierr
    character(len=*), intent(in) :: what
    character(len=TETHER_MAX_ERROR_STRING) :: msg
    integer :: e
    if (ierr == TETHER_SUCCESS) return
    call tether_last_error(msg, e)
    write (*, '("sim: ", a, ": ", a)') what, trim(msg)
    error stop 1
  end subroutine stop_on

end program sim
