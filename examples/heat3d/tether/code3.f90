! Code-3, Tether-coupled: the same heat solver with the temperature on the
! plane Z = Zmax fixed from Code-2's output. Each step the last rank (which
! holds Z = Zmax) receives the plane from Code-2's last rank; every rank
! takes one step. The file version (../file/code3.f90) with s2.out
! replaced by tether_irecv/tether_waitall; every MPI rank joins Tether.
program code3
  use mpi
  use heat3d_solver
  use heat3d_report
  use tether
  use peers, only: universe_rank_of, program_size_of, check
  implicit none
  type(heat_model) :: m
  type(stopwatch) :: w
  integer :: ierr, rank, nprocs, iter, history, code2, req(1)
  real(dp) :: t0, exchange, probes(3)
  real(dp), allocatable :: plane(:)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call tether_init_as('code3', rank, nprocs, ierr)
  call check(ierr, 'tether_init_as')
  code2 = universe_rank_of('code2', program_size_of('code2') - 1)
  call heat_setup(m, MPI_COMM_WORLD, 'heat.dat', fixed_top=.true.)
  allocate (plane((m%nx + 1) * (m%ny + 1)))
  if (rank == 0) history = history_open('code3_history.txt', 'step T(top centre) T(middle) T(quarter)')

  do iter = 1, coupling_steps()
    t0 = now()
    if (rank == nprocs - 1) then
      call tether_irecv(plane, size(plane), TETHER_DOUBLE_PRECISION, code2, iter, TETHER_COMM_UNIVERSE, req(1), ierr)
      call check(ierr, 'tether_irecv')
      call tether_waitall(1, req, TETHER_STATUSES_IGNORE, ierr)
      call check(ierr, 'tether_waitall')
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
  call tether_finalize(ierr)
  call check(ierr, 'tether_finalize')
  call MPI_Finalize(ierr)
end program code3
