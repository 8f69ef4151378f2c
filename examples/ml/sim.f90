! The online-learning showcase's simulation (docs/showcase_ml.md): a tracer
! q on the periodic unit square, stirred by a steady cellular flow,
! diffusing, and reacting (a bistable reaction that drives q towards 0 or 1
! around a threshold, at a rate r(x, y) that varies in space):
!
!   dq/dt = -u.grad(q) + kappa*lap(q) + R(q, r)
!
! R is this model's "expensive physics": the reaction tendency over one
! step, from a sub-stepped RK4 solve in every cell. The rows of the
! grid are split over the MPI ranks (its own MPI, for its halo exchange).
!
! Every step the simulation puts the field "state" (q, r/r0 and the
! tendency R, a 3 x nx x ny array) to the program `ml`, which trains a
! neural network online on (q, r) -> R and puts back the field "tendency",
! its prediction of R for this step's state, made before it trains on it.
! For the first `train` steps the simulation advances with the exact R and
! only records how far off the prediction was; after that it advances
! three copies of the state from the same point: one with the learned R
! (the coupling the showcase is about: the prediction replaces the solve),
! the exact one (the reference), and one without any reaction (what the
! model would be without the term), and reports how far each is from the
! reference. The reference and no-reaction copies are evaluation only and
! are not counted in the time per step.
!
! Usage: sim nx ny steps train outdir
! Writes outdir/sim.csv (rank 0): per step the phase, time, time waiting on
! `ml`, the checksums of the state sent and of the tendency received, the
! prediction's error, and in the second phase the errors of the copies.
program sim
  use mpi
  use tether
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  real(real64), parameter :: pi = acos(-1.0_real64)
  real(real64), parameter :: flow = 1.0_real64, kappa = 2.0e-4_real64, rate0 = 40.0_real64
  real(real64), parameter :: threshold = 0.3_real64
  integer, parameter :: substeps = 16
  integer :: ierr, rank, nprocs, nx, ny, steps, train, ny_local, y0, step, state_field, tend_field, dist
  integer(int64) :: local(3), local2(2), blocks(3)
  real(real64), allocatable :: q(:, :), q_ref(:, :), q_none(:, :), rate(:, :), reaction(:, :)
  real(real64), allocatable :: state(:, :, :), predicted(:, :), u(:, :), v(:, :)
  real(real64) :: dx, dt, t0, t_step, t_wait, t_eval, w0, sums(4), totals(4), err_ml, err_none
  character(len=256) :: arg, outdir
  integer :: unit

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  if (command_argument_count() /= 5) then
    if (rank == 0) write (*, '(a)') 'usage: sim nx ny steps train outdir'
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if
  call get_command_argument(1, arg); read (arg, *) nx
  call get_command_argument(2, arg); read (arg, *) ny
  call get_command_argument(3, arg); read (arg, *) steps
  call get_command_argument(4, arg); read (arg, *) train
  call get_command_argument(5, outdir)

  call tether_init_as('sim', rank, nprocs, ierr); call check(ierr, 'tether_init_as')

  ! Rows (y) in BLOCK parts over the ranks, as the Tether distribution
  ! lays them out: ceil(ny/P) rows each, the last ones fewer.
  blocks = 0
  call tether_dist_create(3, [3_int64, int(nx, int64), int(ny, int64)], [1, 1, nprocs], &
      [TETHER_DIST_NONE, TETHER_DIST_NONE, TETHER_DIST_BLOCK], blocks, TETHER_ORDER_FORTRAN, dist, ierr)
  call check(ierr, 'tether_dist_create state')
  call tether_dist_local_shape(dist, local, ierr); call check(ierr, 'tether_dist_local_shape')
  call tether_field_create('state', TETHER_DOUBLE_PRECISION, dist, 'ml', TETHER_FIELD_MODE_PUT, state_field, ierr)
  call check(ierr, 'tether_field_create state')
  call tether_dist_free(dist, ierr)
  call tether_dist_create(2, [int(nx, int64), int(ny, int64)], [1, nprocs], &
      [TETHER_DIST_NONE, TETHER_DIST_BLOCK], blocks(1:2), TETHER_ORDER_FORTRAN, dist, ierr)
  call check(ierr, 'tether_dist_create tendency')
  call tether_dist_local_shape(dist, local2, ierr); call check(ierr, 'tether_dist_local_shape')
  call tether_field_create('tendency', TETHER_DOUBLE_PRECISION, dist, 'ml', TETHER_FIELD_MODE_GET, tend_field, ierr)
  call check(ierr, 'tether_field_create tendency')
  call tether_dist_free(dist, ierr)
  ny_local = int(local(3))
  y0 = rank * ((ny + nprocs - 1) / nprocs)

  allocate (q(nx, 0:ny_local + 1), q_ref(nx, 0:ny_local + 1), q_none(nx, 0:ny_local + 1))
  allocate (rate(nx, ny_local), reaction(nx, ny_local), u(nx, ny_local), v(nx, ny_local))
  allocate (state(3, nx, ny_local), predicted(nx, ny_local))
  dx = 1.0_real64 / nx
  dt = 0.2_real64 * min(dx / flow, dx * dx / (4.0_real64 * kappa))
  call initial_state()

  if (rank == 0) then
    open (newunit=unit, file=trim(outdir) // '/sim.csv', status='replace', action='write')
    write (unit, '(a)') 'step,phase,seconds,wait_seconds,state_checksum,tendency_checksum,prediction_rmse,error_ml,error_none'
  end if
  w0 = MPI_Wtime()
  do step = 0, steps - 1
    t0 = MPI_Wtime()
    t_wait = 0; t_eval = 0
    if (step == train) then
      q_ref = q
      q_none = q
    end if
    call halo(q)
    if (step < train) then
      call exact_reaction(q, reaction)
    else
      reaction = 0
    end if
    state(1, :, :) = q(:, 1:ny_local)
    state(2, :, :) = rate / rate0
    state(3, :, :) = reaction
    sums(1) = checksum3(state)

    t_step = MPI_Wtime()
    call tether_field_put(state_field, int(step, int64), state, ierr); call check(ierr, 'tether_field_put')
    call tether_field_get(tend_field, int(step, int64), predicted, ierr); call check(ierr, 'tether_field_get')
    t_wait = MPI_Wtime() - t_step
    sums(2) = checksum2(predicted)

    if (step < train) then
      sums(3) = sum((predicted - reaction)**2)
      call advance(q, reaction)
    else
      sums(3) = 0
      call advance(q, predicted)
      t_step = MPI_Wtime()
      call halo(q_ref)
      call exact_reaction(q_ref, reaction)
      call advance(q_ref, reaction)
      call halo(q_none)
      reaction = 0
      call advance(q_none, reaction)
      t_eval = MPI_Wtime() - t_step
    end if
    call MPI_Reduce(sums, totals, 3, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
    call errors(err_ml, err_none)
    call MPI_Reduce([MPI_Wtime() - t0 - t_eval, t_wait], sums, 2, MPI_DOUBLE_PRECISION, MPI_MAX, 0, &
        MPI_COMM_WORLD, ierr)
    if (rank == 0) write (unit, '(i0,",",a,7(",",es23.16))') step, &
        merge('exact', 'model', step < train), sums(1), sums(2), totals(1), totals(2), &
        sqrt(totals(3) / (real(nx, real64) * ny)), err_ml, err_none
  end do
  if (rank == 0) then
    close (unit)
    write (*, '("sim: ", i0, " steps of ", i0, "x", i0, " on ", i0, " ranks, ", f8.3, " ms per step; ", &
        & "after ", i0, " steps with the learned reaction the error is ", es9.2, " (without the reaction ", es9.2, ")")') &
        steps, nx, ny, nprocs, 1000 * (MPI_Wtime() - w0) / max(steps, 1), steps - train, err_ml, err_none
  end if
  call tether_field_free(state_field, ierr); call check(ierr, 'tether_field_free state')
  call tether_field_free(tend_field, ierr); call check(ierr, 'tether_field_free tendency')
  call tether_finalize(ierr); call check(ierr, 'tether_finalize')
  call MPI_Finalize(ierr)

contains

  subroutine initial_state()
    integer :: i, j
    real(real64) :: x, y
    do j = 1, ny_local
      y = (y0 + j - 0.5_real64) * dx
      do i = 1, nx
        x = (i - 0.5_real64) * dx
        q(i, j) = min(1.0_real64, exp(-((x - 0.3_real64)**2 + (y - 0.35_real64)**2) / 0.02_real64) &
            + 0.9_real64 * exp(-((x - 0.7_real64)**2 + (y - 0.65_real64)**2) / 0.01_real64))
        rate(i, j) = rate0 * (1.0_real64 + 0.5_real64 * sin(2 * pi * x) * sin(4 * pi * y))
        u(i, j) = flow * sin(2 * pi * x) * cos(2 * pi * y)
        v(i, j) = -flow * cos(2 * pi * x) * sin(2 * pi * y)
      end do
    end do
  end subroutine initial_state

  ! Rows 0 and ny_local+1 from the neighbours, periodic in y.
  subroutine halo(a)
    real(real64), intent(inout) :: a(:, 0:)
    integer :: up, down
    up = mod(rank + 1, nprocs)
    down = mod(rank - 1 + nprocs, nprocs)
    call MPI_Sendrecv(a(:, ny_local), nx, MPI_DOUBLE_PRECISION, up, 1, a(:, 0), nx, MPI_DOUBLE_PRECISION, down, 1, &
        MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Sendrecv(a(:, 1), nx, MPI_DOUBLE_PRECISION, down, 2, a(:, ny_local + 1), nx, MPI_DOUBLE_PRECISION, up, 2, &
        MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  end subroutine halo

  ! The reaction's effect over one step, dq = r q (1-q) (q-a) dt, solved
  ! with `substeps` RK4 steps per cell, as a tendency.
  subroutine exact_reaction(a, tendency)
    real(real64), intent(in) :: a(:, 0:)
    real(real64), intent(out) :: tendency(:, :)
    integer :: i, j, k
    real(real64) :: c, h, k1, k2, k3, k4
    h = dt / substeps
    do j = 1, ny_local
      do i = 1, nx
        c = a(i, j)
        do k = 1, substeps
          k1 = f(c, rate(i, j))
          k2 = f(c + 0.5_real64 * h * k1, rate(i, j))
          k3 = f(c + 0.5_real64 * h * k2, rate(i, j))
          k4 = f(c + h * k3, rate(i, j))
          c = c + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        end do
        tendency(i, j) = (c - a(i, j)) / dt
      end do
    end do
  end subroutine exact_reaction

  pure real(real64) function f(c, r)
    real(real64), intent(in) :: c, r
    f = r * c * (1 - c) * (c - threshold)
  end function f

  ! One explicit step: upwind advection, central diffusion, the given
  ! reaction tendency. Needs the halo rows of `a`.
  subroutine advance(a, tendency)
    real(real64), intent(inout) :: a(:, 0:)
    real(real64), intent(in) :: tendency(:, :)
    real(real64) :: new(nx, ny_local), ax, ay
    integer :: i, j, ie, iw
    do j = 1, ny_local
      do i = 1, nx
        ie = merge(1, i + 1, i == nx)
        iw = merge(nx, i - 1, i == 1)
        ax = merge(a(i, j) - a(iw, j), a(ie, j) - a(i, j), u(i, j) > 0)
        ay = merge(a(i, j) - a(i, j - 1), a(i, j + 1) - a(i, j), v(i, j) > 0)
        new(i, j) = a(i, j) + dt * (-(u(i, j) * ax + v(i, j) * ay) / dx &
            + kappa * (a(ie, j) + a(iw, j) + a(i, j + 1) + a(i, j - 1) - 4 * a(i, j)) / (dx * dx) &
            + tendency(i, j))
      end do
    end do
    a(:, 1:ny_local) = new
  end subroutine advance

  ! Relative L2 distances of the learned and the no-reaction copies from
  ! the reference (zero before the second phase), on every rank.
  subroutine errors(e_ml, e_none)
    real(real64), intent(out) :: e_ml, e_none
    real(real64) :: part(3), whole(3)
    if (step < train) then
      e_ml = 0; e_none = 0
      return
    end if
    part = [sum((q(:, 1:ny_local) - q_ref(:, 1:ny_local))**2), sum((q_none(:, 1:ny_local) - q_ref(:, 1:ny_local))**2), &
        sum(q_ref(:, 1:ny_local)**2)]
    call MPI_Allreduce(part, whole, 3, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    e_ml = sqrt(whole(1) / whole(3))
    e_none = sqrt(whole(2) / whole(3))
  end subroutine errors

  ! Position-weighted sums, the same on both sides of a field whatever the
  ! decompositions: a value that lands in the wrong place changes them.
  real(real64) function checksum3(a)
    real(real64), intent(in) :: a(:, :, :)
    integer :: c, i, j
    checksum3 = 0
    do j = 1, ny_local
      do i = 1, nx
        do c = 1, 3
          checksum3 = checksum3 + a(c, i, j) * weight(c - 1, i - 1, y0 + j - 1)
        end do
      end do
    end do
  end function checksum3

  real(real64) function checksum2(a)
    real(real64), intent(in) :: a(:, :)
    integer :: i, j
    checksum2 = 0
    do j = 1, ny_local
      do i = 1, nx
        checksum2 = checksum2 + a(i, j) * weight(0, i - 1, y0 + j - 1)
      end do
    end do
  end function checksum2

  pure real(real64) function weight(c, i, j)
    integer, intent(in) :: c, i, j
    weight = 1 + mod(7 * c + 3 * i + 5 * j, 11)
  end function weight

  subroutine check(code, what)
    integer, intent(in) :: code
    character(len=*), intent(in) :: what
    character(len=TETHER_MAX_ERROR_STRING) :: msg
    integer :: e
    if (code == TETHER_SUCCESS) return
    call tether_last_error(msg, e)
    write (*, '("sim: ", a, ": ", a)') what, trim(msg)
    call MPI_Abort(MPI_COMM_WORLD, 1, e)
  end subroutine check

end program sim
