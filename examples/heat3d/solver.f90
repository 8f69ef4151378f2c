! Unsteady three-dimensional heat conduction by the finite element method,
! parallelized with MPI inside the program: Code-2 and Code-3 of the heat
! coupling example (both versions use this module unchanged).
!
!   capacity dT/dt = conductivity * laplacian(T) + point source
!
! on a box of nx x ny x nz cubic hexahedra of side h (8-node trilinear
! elements), lumped mass, backward Euler in time, and at each step
! (M/dt + K) T_new = M/dt T_old + F solved by conjugate gradients with a
! Jacobi preconditioner. The plane Z = 0 is held at T = 0; Code-3 also
! holds the plane Z = Zmax at the temperatures it is given; the other
! faces are insulated.
!
! Parallelization: the element layers in z are split into slabs, one per
! MPI rank. Neighbouring ranks share the node plane between their slabs;
! an assembled vector is completed by adding the neighbour's partial sums
! on that plane (the halo exchange, MPI_Sendrecv), and dot products count
! a shared node once (on the lower rank). Everything is deterministic for
! a given number of ranks.
module heat3d_solver
  use mpi
  implicit none
  private
  public :: heat_model, heat_setup, heat_step, heat_probe, heat_top_plane, dp

  integer, parameter :: dp = kind(1.0d0)
  real(dp), parameter :: tolerance = 1.0e-10_dp
  integer, parameter :: max_iterations = 1000

  ! Corner c (1..8) of an element is at offset (dx, dy, dz)(c).
  integer, parameter :: dx(8) = [0, 1, 0, 1, 0, 1, 0, 1]
  integer, parameter :: dy(8) = [0, 0, 1, 1, 0, 0, 1, 1]
  integer, parameter :: dz(8) = [0, 0, 0, 0, 1, 1, 1, 1]

  type :: heat_model
    integer :: comm = MPI_COMM_NULL, rank = 0, nprocs = 1
    integer :: nx = 0, ny = 0, nz = 0      ! elements along x, y, z (whole box)
    integer :: kz0 = 0, nlz = 0            ! my first element layer (0-based) and my layer count
    integer :: source(3) = 0               ! global node (i, j, k) of the point source
    real(dp) :: h = 0, dt = 0
    real(dp) :: ke(8, 8) = 0               ! element stiffness matrix
    logical :: fixed_top = .false.         ! Code-3: Z = Zmax held at given temperatures
    integer :: iterations = 0              ! CG iterations of the last step
    ! Node arrays (0:nx, 0:ny, 0:nlz): my node planes, the shared ones included.
    real(dp), allocatable :: t(:, :, :)    ! temperature
    real(dp), allocatable :: mass(:, :, :) ! lumped mass / dt, assembled
    real(dp), allocatable :: diag(:, :, :) ! diagonal of M/dt + K, assembled (Jacobi)
    real(dp), allocatable :: weight(:, :, :) ! 1 where I own the node, 0 on a plane the rank below owns
    logical, allocatable :: fixed(:, :, :) ! Dirichlet nodes
  end type heat_model

contains

  ! Reads the namelist &heat (nx, ny, nz, h, dt, conductivity, capacity,
  ! source) from `file` and sets up my slab of the box over `comm`.
  subroutine heat_setup(m, comm, file, fixed_top)
    type(heat_model), intent(out) :: m
    integer, intent(in) :: comm
    character(len=*), intent(in) :: file
    logical, intent(in) :: fixed_top
    integer :: nx, ny, nz, source(3), unit, ierr, c, i, j, k
    real(dp) :: h, dt, conductivity, capacity
    namelist /heat/ nx, ny, nz, h, dt, conductivity, capacity, source

    open (newunit=unit, file=file, status='old', action='read')
    read (unit, nml=heat)
    close (unit)
    if (min(nx, ny, nz) < 1 .or. h <= 0 .or. dt <= 0 .or. conductivity <= 0 .or. capacity <= 0) &
      error stop 'heat.dat: nx, ny, nz must be >= 1 and h, dt, conductivity, capacity > 0'

    m%comm = comm
    call MPI_Comm_rank(comm, m%rank, ierr)
    call MPI_Comm_size(comm, m%nprocs, ierr)
    if (nz < m%nprocs) error stop 'heat.dat: nz must be at least the number of MPI ranks'
    m%nx = nx
    m%ny = ny
    m%nz = nz
    m%h = h
    m%dt = dt
    m%source = source
    m%fixed_top = fixed_top
    m%nlz = nz / m%nprocs + merge(1, 0, m%rank < mod(nz, m%nprocs))
    m%kz0 = m%rank * (nz / m%nprocs) + min(m%rank, mod(nz, m%nprocs))
    m%ke = conductivity * h * unit_stiffness()

    allocate (m%t(0:nx, 0:ny, 0:m%nlz), source=0.0_dp)
    allocate (m%mass, m%diag, m%weight, mold=m%t)
    allocate (m%fixed(0:nx, 0:ny, 0:m%nlz), source=.false.)
    m%mass = 0
    m%diag = 0
    do k = 0, m%nlz - 1
      do j = 0, ny - 1
        do i = 0, nx - 1
          do c = 1, 8
            m%mass(i + dx(c), j + dy(c), k + dz(c)) = m%mass(i + dx(c), j + dy(c), k + dz(c)) &
                                                       + capacity * h**3 / 8 / dt
            m%diag(i + dx(c), j + dy(c), k + dz(c)) = m%diag(i + dx(c), j + dy(c), k + dz(c)) + m%ke(c, c)
          end do
        end do
      end do
    end do
    call complete_shared_plane(m, m%mass)
    call complete_shared_plane(m, m%diag)
    m%diag = m%diag + m%mass
    m%weight = 1
    if (m%rank > 0) m%weight(:, :, 0) = 0
    if (m%rank == 0) m%fixed(:, :, 0) = .true.
    if (fixed_top .and. m%rank == m%nprocs - 1) m%fixed(:, :, m%nlz) = .true.
    if (m%rank == 0) write (*, '(a, 3(i0, a), i0, 2a)') 'heat solver: ', nx, ' x ', ny, ' x ', nz, &
      ' elements on ', m%nprocs, ' MPI ranks of ', mpi_library()
  end subroutine heat_setup

  ! The MPI library this program was built with, as its first words say
  ! ("MPICH Version: 4.0.2", "Open MPI v4.1.4"): up to the first line end
  ! or comma, tabs as spaces.
  function mpi_library() result(name)
    character(len=:), allocatable :: name
    character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: version
    integer :: length, ierr, i, last
    call MPI_Get_library_version(version, length, ierr)
    last = length
    do i = 1, length
      if (version(i:i) == ',' .or. version(i:i) == achar(10)) then
        last = i - 1
        exit
      end if
      if (version(i:i) == achar(9)) version(i:i) = ' '
    end do
    name = trim(version(:last))
  end function mpi_library

  ! One backward Euler step. Code-2 passes the point source's value; Code-3's
  ! top rank passes the temperatures of the plane Z = Zmax.
  subroutine heat_step(m, source, top)
    type(heat_model), intent(inout) :: m
    real(dp), intent(in), optional :: source
    real(dp), intent(in), optional :: top(0:, 0:)
    real(dp) :: b(0:m%nx, 0:m%ny, 0:m%nlz)
    integer :: k

    b = m%mass * m%t
    if (present(source)) then
      k = m%source(3) - m%kz0
      if (k >= 0 .and. k <= m%nlz) b(m%source(1), m%source(2), k) = b(m%source(1), m%source(2), k) + source
    end if
    if (present(top)) then
      if (.not. m%fixed_top .or. m%rank /= m%nprocs - 1) error stop 'heat_step: top temperatures on a rank without Z = Zmax'
      m%t(:, :, m%nlz) = top
    end if
    call conjugate_gradients(m, b, m%t)
  end subroutine heat_step

  ! Jacobi-preconditioned CG for (M/dt + K) x = b on the free nodes; x
  ! holds the Dirichlet values on fixed nodes and the initial guess elsewhere.
  subroutine conjugate_gradients(m, b, x)
    type(heat_model), intent(inout) :: m
    real(dp), intent(in) :: b(0:, 0:, 0:)
    real(dp), intent(inout) :: x(0:, 0:, 0:)
    real(dp), allocatable :: r(:, :, :), z(:, :, :), p(:, :, :), q(:, :, :)
    real(dp) :: rz, rz_old, alpha, r0, rr
    integer :: it

    allocate (r, z, p, q, mold=x)
    call apply(m, x, q)
    r = merge(0.0_dp, b - q, m%fixed)
    z = r / m%diag
    p = z
    rz = dot(m, r, z)
    r0 = sqrt(dot(m, r, r))
    m%iterations = 0
    if (r0 == 0) return
    do it = 1, max_iterations
      call apply(m, p, q)
      q = merge(0.0_dp, q, m%fixed)
      alpha = rz / dot(m, p, q)
      x = x + alpha * p
      r = r - alpha * q
      m%iterations = it
      rr = sqrt(dot(m, r, r))
      if (rr <= tolerance * r0) return
      z = r / m%diag
      rz_old = rz
      rz = dot(m, r, z)
      p = z + (rz / rz_old) * p
    end do
    error stop 'conjugate gradients did not converge'
  end subroutine conjugate_gradients

  ! y = (M/dt + K) x, assembled over the element layers of every rank.
  subroutine apply(m, x, y)
    type(heat_model), intent(in) :: m
    real(dp), intent(in) :: x(0:, 0:, 0:)
    real(dp), intent(out) :: y(0:, 0:, 0:)
    real(dp) :: xe(8), ye(8)
    integer :: i, j, k, c
    y = 0
    do k = 0, m%nlz - 1
      do j = 0, m%ny - 1
        do i = 0, m%nx - 1
          do c = 1, 8
            xe(c) = x(i + dx(c), j + dy(c), k + dz(c))
          end do
          ye = matmul(m%ke, xe)
          do c = 1, 8
            y(i + dx(c), j + dy(c), k + dz(c)) = y(i + dx(c), j + dy(c), k + dz(c)) + ye(c)
          end do
        end do
      end do
    end do
    call complete_shared_plane(m, y)
    y = y + m%mass * x
  end subroutine apply

  ! The halo exchange: each rank adds its neighbours' partial sums on the
  ! node planes it shares with them (a + b on one side is b + a on the
  ! other, so both copies stay identical).
  subroutine complete_shared_plane(m, v)
    type(heat_model), intent(in) :: m
    real(dp), intent(inout) :: v(0:, 0:, 0:)
    real(dp), dimension(0:m%nx, 0:m%ny) :: my_top, my_bottom, from_below, from_above
    integer :: up, down, n, ierr
    up = merge(m%rank + 1, MPI_PROC_NULL, m%rank < m%nprocs - 1)
    down = merge(m%rank - 1, MPI_PROC_NULL, m%rank > 0)
    n = (m%nx + 1) * (m%ny + 1)
    my_top = v(:, :, m%nlz)
    my_bottom = v(:, :, 0)
    from_below = 0
    from_above = 0
    call MPI_Sendrecv(my_top, n, MPI_DOUBLE_PRECISION, up, 1, from_below, n, MPI_DOUBLE_PRECISION, down, 1, &
                      m%comm, MPI_STATUS_IGNORE, ierr)
    call MPI_Sendrecv(my_bottom, n, MPI_DOUBLE_PRECISION, down, 2, from_above, n, MPI_DOUBLE_PRECISION, up, 2, &
                      m%comm, MPI_STATUS_IGNORE, ierr)
    if (down /= MPI_PROC_NULL) v(:, :, 0) = my_bottom + from_below
    if (up /= MPI_PROC_NULL) v(:, :, m%nlz) = my_top + from_above
  end subroutine complete_shared_plane

  ! Global dot product; a shared node counts once.
  real(dp) function dot(m, a, b)
    type(heat_model), intent(in) :: m
    real(dp), intent(in) :: a(0:, 0:, 0:), b(0:, 0:, 0:)
    real(dp) :: mine
    integer :: ierr
    mine = sum(m%weight * a * b)
    call MPI_Allreduce(mine, dot, 1, MPI_DOUBLE_PRECISION, MPI_SUM, m%comm, ierr)
  end function dot

  ! Temperature at global node (i, j, k), on every rank.
  real(dp) function heat_probe(m, i, j, k)
    type(heat_model), intent(in) :: m
    integer, intent(in) :: i, j, k
    real(dp) :: mine
    integer :: local, ierr
    local = k - m%kz0
    mine = 0
    if (local >= 0 .and. local <= m%nlz) mine = m%t(i, j, local) * m%weight(i, j, local)
    call MPI_Allreduce(mine, heat_probe, 1, MPI_DOUBLE_PRECISION, MPI_SUM, m%comm, ierr)
  end function heat_probe

  ! The temperatures of the plane Z = Zmax (meaningful on the last rank).
  function heat_top_plane(m) result(plane)
    type(heat_model), intent(in) :: m
    real(dp) :: plane(0:m%nx, 0:m%ny)
    plane = m%t(:, :, m%nlz)
  end function heat_top_plane

  ! Stiffness of the unit cube's trilinear element, integral of
  ! grad N_a . grad N_b, by 2 x 2 x 2 Gauss quadrature (exact here).
  function unit_stiffness() result(k)
    real(dp) :: k(8, 8), g(2), grad(3, 8), x(3)
    integer :: a, p, q, s
    g = [0.5_dp - 0.5_dp / sqrt(3.0_dp), 0.5_dp + 0.5_dp / sqrt(3.0_dp)]
    k = 0
    do p = 1, 2
      do q = 1, 2
        do s = 1, 2
          x = [g(p), g(q), g(s)]
          do a = 1, 8
            grad(1, a) = sgn(dx(a)) * shape1(dy(a), x(2)) * shape1(dz(a), x(3))
            grad(2, a) = shape1(dx(a), x(1)) * sgn(dy(a)) * shape1(dz(a), x(3))
            grad(3, a) = shape1(dx(a), x(1)) * shape1(dy(a), x(2)) * sgn(dz(a))
          end do
          k = k + matmul(transpose(grad), grad) / 8
        end do
      end do
    end do
  contains
    ! The 1-D shape function of the node at offset d, and its slope.
    real(dp) function shape1(d, t)
      integer, intent(in) :: d
      real(dp), intent(in) :: t
      shape1 = merge(t, 1 - t, d == 1)
    end function shape1
    real(dp) function sgn(d)
      integer, intent(in) :: d
      sgn = merge(1.0_dp, -1.0_dp, d == 1)
    end function sgn
  end function unit_stiffness
end module heat3d_solver
