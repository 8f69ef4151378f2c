! Code-2, Tether-coupled: the heat solver driven by Code-1's source. Each
! step, rank 0 receives (time, Source) from Code-1 and broadcasts it with
! MPI, every rank takes one step of the solver, and the last rank sends
! the temperatures of the plane Z = Zmax to Code-3's last rank. The file
! version (../file/code2.f90) with s1.out and s2.out replaced by
! tether_irecv/tether_isend/tether_waitall; every MPI rank joins Tether.
program code2
  use mpi
  use heat3d_solver
  use heat3d_report
  use tether
  use peers, only: universe_rank_of, program_size_of, check
  implicit none
  type(heat_model) :: m
  type(stopwatch) :: w
  integer :: ierr, rank, nprocs, iter, history, i, j, k, code1, code3, req(1)
  real(dp) :: input(2), t0, t1, exchange, probes(3)
  real(dp), allocatable :: plane(:)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call tether_init_as('code2', rank, nprocs, ierr)
  call check(ierr, 'tether_init_as')
  code1 = universe_rank_of('code1', 0)
  code3 = universe_rank_of('code3', program_size_of('code3') - 1)
  call heat_setup(m, MPI_COMM_WORLD, 'heat.dat', fixed_top=.false.)
  allocate (plane((m%nx + 1) * (m%ny + 1)))
  if (rank == 0) history = history_open('code2_history.txt', 'step time source T(source) T(top centre) T(quarter)')

  do iter = 1, coupling_steps()
    t0 = now()
    if (rank == 0) then
      call tether_irecv(input, 2, TETHER_DOUBLE_PRECISION, code1, iter, TETHER_COMM_UNIVERSE, req(1), ierr)
      call check(ierr, 'tether_irecv')
      call tether_waitall(1, req, TETHER_STATUSES_IGNORE, ierr)
      call check(ierr, 'tether_waitall')
    end if
    call MPI_Bcast(input, 2, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
    w%exchange = w%exchange + (now() - t0)

    call heat_step(m, source=input(2))

    t1 = now()
    if (rank == nprocs - 1) then
      plane = reshape(heat_top_plane(m), [(m%nx + 1) * (m%ny + 1)])
      call tether_isend(plane, size(plane), TETHER_DOUBLE_PRECISION, code3, iter, TETHER_COMM_UNIVERSE, req(1), ierr)
      call check(ierr, 'tether_isend')
      call tether_waitall(1, req, TETHER_STATUSES_IGNORE, ierr)
      call check(ierr, 'tether_waitall')
    end if
    w%exchange = w%exchange + (now() - t1)

    i = m%source(1)
    j = m%source(2)
    k = m%source(3)
    probes = [heat_probe(m, i, j, k), heat_probe(m, m%nx / 2, m%ny / 2, m%nz), heat_probe(m, i / 2, j / 2, k / 2)]
    w%total = w%total + (now() - t0)
    w%steps = iter
    if (rank == 0) then
      call history_write(history, iter, [input, probes])
      write (*, '("step ", i3, "  source ", f9.4, "  T(source) ", es12.5, "  T(top centre) ", es12.5, "  CG ", i0)') &
        iter, input(2), probes(1), probes(2), m%iterations
    end if
  end do

  call MPI_Reduce(w%exchange, exchange, 1, MPI_DOUBLE_PRECISION, MPI_MAX, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) call print_summary('code2', w, exchange)
  call tether_finalize(ierr)
  call check(ierr, 'tether_finalize')
  call MPI_Finalize(ierr)
end program code2
