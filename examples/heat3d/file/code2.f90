! Code-2, file-coupled: the heat solver driven by Code-1's source. Each
! step, rank 0 takes (time, Source) from s1.out and broadcasts it with
! MPI, every rank takes one step of the solver, and the last rank posts
! the temperatures of the plane Z = Zmax as s2.out for Code-3.
program code2
  use mpi
  use heat3d_solver
  use heat3d_report
  use mailbox, only: post, take
  implicit none
  type(heat_model) :: m
  type(stopwatch) :: w
  integer :: ierr, rank, nprocs, iter, history, i, j, k
  real(dp) :: input(2), t0, t1, exchange, probes(3)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call heat_setup(m, MPI_COMM_WORLD, 'heat.dat', fixed_top=.false.)
  if (rank == 0) history = history_open('code2_history.txt', 'step time source T(source) T(top centre) T(quarter)')

  do iter = 1, coupling_steps()
    t0 = now()
    if (rank == 0) call take('s1.out', iter, input)
    call MPI_Bcast(input, 2, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
    w%exchange = w%exchange + (now() - t0)

    call heat_step(m, source=input(2))

    t1 = now()
    if (rank == nprocs - 1) call post('s2.out', iter, reshape(heat_top_plane(m), [(m%nx + 1) * (m%ny + 1)]))
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
  call MPI_Finalize(ierr)
end program code2
