! Code-3, file-coupled: the same heat solver with the temperature on the
! plane Z = Zmax fixed from Code-2's output. Each step the last rank (which
! holds Z = Zmax) takes the plane from s2.out; every rank takes one step.
program code3
  use mpi
  use heat3d_solver
  use heat3d_report
  use mailbox, only: take
  implicit none
  type(heat_model) :: m
  type(stopwatch) :: w
  integer :: ierr, rank, nprocs, iter, history
  real(dp) :: t0, exchange, probes(3)
  real(dp), allocatable :: plane(:)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call heat_setup(m, MPI_COMM_WORLD, 'heat.dat', fixed_top=.true.)
  allocate (plane((m%nx + 1) * (m%ny + 1)))
  if (rank == 0) history = history_open('code3_history.txt', 'step T(top centre) T(middle) T(quarter)')

  do iter = 1, coupling_steps()
    t0 = now()
    if (rank == nprocs - 1) then
      call take('s2.out', iter, plane)
      w%exchange = w%exchange + (now() - t0)
      call heat_step(m, top=reshape(plane, [m%nx + 1, m%ny + 1]))
    else
      call heat_step(m)
    end if

    probes = [heat_probe(m, m%nx / 2, m%ny / 2, m%nz), heat_probe(m, m%nx / 2, m%ny / 2, m%nz / 2), &
              heat_probe(m, m%nx / 2, m%ny / 2, m%nz / 4)]
    w%total = w%total + (now() - t0)
    w%steps = iter
    if (rank == 0) then
      call history_write(history, iter, probes)
      write (*, '("step ", i3, "  T(top centre) ", es12.5, "  T(middle) ", es12.5, "  CG ", i0)') &
        iter, probes(1), probes(2), m%iterations
    end if
  end do

  call MPI_Reduce(w%exchange, exchange, 1, MPI_DOUBLE_PRECISION, MPI_MAX, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) call print_summary('code3', w, exchange)
  call MPI_Finalize(ierr)
end program code3
