! Every collective from Fortran, blocking and non-blocking, on the universe
! and on a communicator of the universe's ranks in reverse order (built
! with tether_comm_create_ranks), each result checked against the value
! computed here. Each process prints "ok collectives" when all passed.
program coll_suite
  use, intrinsic :: iso_fortran_env, only: int64, real32, real64
  use tether
  use checks
  implicit none

  integer :: ierr, me, n, k, reversed
  integer, allocatable :: ranks(:)
  logical :: nb

  call tether_init(ierr)
  call check(ierr, 'tether_init')
  call tether_universe_rank(me, ierr)
  call check(ierr, 'tether_universe_rank')
  call tether_universe_size(n, ierr)
  call check(ierr, 'tether_universe_size')
  allocate (ranks(n))
  ranks = [(n - 1 - k, k = 0, n - 1)]
  call tether_comm_create_ranks(n, ranks, reversed, ierr)
  call check(ierr, 'tether_comm_create_ranks')

  do k = 0, 1
    nb = k == 1
    call suite(TETHER_COMM_UNIVERSE, nb)
    call suite(reversed, nb)
  end do

  call tether_comm_free(reversed, ierr)
  call check(ierr, 'tether_comm_free')
  call expect(reversed == TETHER_COMM_NULL, 'comm_free to reset the handle')
  call tether_finalize(ierr)
  call check(ierr, 'tether_finalize')
  print '("ok collectives")'

contains

  subroutine suite(comm, nb)
    integer, intent(in) :: comm
    logical, intent(in) :: nb
    integer :: r, p
    call tether_comm_rank(comm, r, ierr)
    call check(ierr, 'comm_rank')
    call tether_comm_size(comm, p, ierr)
    call check(ierr, 'comm_size')
    call barrier(comm, nb)
    call bcast(comm, nb, r, p)
    call reductions(comm, nb, r, p)
    call gathers(comm, nb, r, p)
    call scatters(comm, nb, r, p)
    call all_to_all(comm, nb, r, p)
  end subroutine suite

  ! Completes a non-blocking collective's request, or checks the blocking
  ! call's ierr.
  subroutine finish(nb, req, what)
    logical, intent(in) :: nb
    integer, intent(inout) :: req
    character(len=*), intent(in) :: what
    call check(ierr, what)
    if (.not. nb) return
    call tether_wait(req, TETHER_STATUS_IGNORE, ierr)
    call check(ierr, what // ' (wait)')
  end subroutine finish

  subroutine barrier(comm, nb)
    integer, intent(in) :: comm
    logical, intent(in) :: nb
    integer :: req
    if (nb) then
      call tether_ibarrier(comm, req, ierr)
    else
      call tether_barrier(comm, ierr)
    end if
    call finish(nb, req, 'barrier')
  end subroutine barrier

  ! A 3-D double precision array from the last rank.
  subroutine bcast(comm, nb, r, p)
    integer, intent(in) :: comm, r, p
    logical, intent(in) :: nb
    real(real64), asynchronous :: cube(2, 3, 2)
    integer :: req, i
    cube = merge(1.0_real64, -1.0_real64, r == p - 1) * reshape([(i * 0.5_real64, i = 1, 12)], shape(cube))
    if (nb) then
      call tether_ibcast(cube, size(cube), TETHER_DOUBLE_PRECISION, p - 1, comm, req, ierr)
    else
      call tether_bcast(cube, size(cube, kind=int64), TETHER_DOUBLE_PRECISION, p - 1, comm, ierr)
    end if
    call finish(nb, req, 'bcast')
    call expect(all(cube == reshape([(i * 0.5_real64, i = 1, 12)], shape(cube))), 'the root''s cube')
  end subroutine bcast

  ! reduce (integer SUM to root 0), allreduce (real MAX in place; complex
  ! SUM), allreduce of (value, index) pairs with MAXLOC, and
  ! reduce_scatter_block.
  subroutine reductions(comm, nb, r, p)
    integer, intent(in) :: comm, r, p
    logical, intent(in) :: nb
    integer, asynchronous :: ints(2), sums(2), blocks(2 * p), mine(2)
    real(real32), asynchronous :: top(3)
    complex(real64), asynchronous :: z, zsum
    real(real64), asynchronous :: pair(2), best(2)
    integer :: req, j
    ints = [r + 1, -(r + 1)]
    sums = 0
    if (nb) then
      call tether_ireduce(ints, sums, 2, TETHER_INTEGER, TETHER_SUM, 0, comm, req, ierr)
    else
      call tether_reduce(ints, sums, 2, TETHER_INTEGER, TETHER_SUM, 0, comm, ierr)
    end if
    call finish(nb, req, 'reduce')
    if (r == 0) call expect(all(sums == [p * (p + 1) / 2, -p * (p + 1) / 2]), 'the integer sums at the root')

    top = [real(r, real32), real(-r, real32), 2.5_real32]
    if (nb) then
      call tether_iallreduce(TETHER_IN_PLACE, top, 3, TETHER_REAL, TETHER_MAX, comm, req, ierr)
    else
      call tether_allreduce(TETHER_IN_PLACE, top, 3, TETHER_REAL, TETHER_MAX, comm, ierr)
    end if
    call finish(nb, req, 'allreduce in place')
    call expect(all(top == [real(p - 1, real32), 0.0_real32, 2.5_real32]), 'the maxima, in place')

    z = cmplx(r, 1, real64)
    if (nb) then
      call tether_iallreduce(z, zsum, 1, TETHER_DOUBLE_COMPLEX, TETHER_SUM, comm, req, ierr)
    else
      call tether_allreduce(z, zsum, 1, TETHER_DOUBLE_COMPLEX, TETHER_SUM, comm, ierr)
    end if
    call finish(nb, req, 'allreduce complex')
    call expect(zsum == cmplx(p * (p - 1) / 2, p, real64), 'the complex sum')

    pair = [real(mod(r * 7, p), real64), real(r, real64)]
    call tether_allreduce(pair, best, 1, TETHER_2DOUBLE_PRECISION, TETHER_MAXLOC, comm, ierr)
    call check(ierr, 'allreduce maxloc')
    call expect(best(1) == p - 1 .and. best(2) == minval([(real(j, real64), j = 0, p - 1)], &
                mask=[(mod(j * 7, p) == p - 1, j = 0, p - 1)]), 'MAXLOC: the largest value, lowest index')

    blocks = [(r + (j - 1) / 2, j = 1, 2 * p)]
    if (nb) then
      call tether_ireduce_scatter_block(blocks, mine, 2, TETHER_INTEGER, TETHER_SUM, comm, req, ierr)
    else
      call tether_reduce_scatter_block(blocks, mine, 2, TETHER_INTEGER, TETHER_SUM, comm, ierr)
    end if
    call finish(nb, req, 'reduce_scatter_block')
    call expect(all(mine == p * (p - 1) / 2 + p * r), 'my block of the sums')
  end subroutine reductions

  ! gather and gatherv to root 0, allgather and allgatherv.
  subroutine gathers(comm, nb, r, p)
    integer, intent(in) :: comm, r, p
    logical, intent(in) :: nb
    integer, asynchronous :: two(2), all2(2, p), counts(p), displs(p)
    real(real64), asynchronous :: mine(r + 1), packed(p * (p + 1) / 2)
    complex(real32), asynchronous :: c, every(p)
    integer :: req, j, i
    two = [r, r * r]
    all2 = 0
    if (nb) then
      call tether_igather(two, 2, TETHER_INTEGER, all2, 2, TETHER_INTEGER, 0, comm, req, ierr)
    else
      call tether_gather(two, 2, TETHER_INTEGER, all2, 2, TETHER_INTEGER, 0, comm, ierr)
    end if
    call finish(nb, req, 'gather')
    if (r == 0) call expect(all(all2(1, :) == [(j, j = 0, p - 1)]) .and. all(all2(2, :) == [(j * j, j = 0, p - 1)]), &
                            'the gathered pairs')

    counts = [(j, j = 1, p)]
    displs = [(j * (j - 1) / 2, j = 1, p)]
    mine = [(r + i / 10.0_real64, i = 1, r + 1)]
    packed = 0
    if (nb) then
      call tether_igatherv(mine, r + 1, TETHER_DOUBLE_PRECISION, packed, counts, displs, TETHER_DOUBLE_PRECISION, &
                           0, comm, req, ierr)
    else
      call tether_gatherv(mine, r + 1, TETHER_DOUBLE_PRECISION, packed, counts, displs, TETHER_DOUBLE_PRECISION, &
                          0, comm, ierr)
    end if
    call finish(nb, req, 'gatherv')
    if (r == 0) call expect(all(packed == [((j + i / 10.0_real64, i = 1, j + 1), j = 0, p - 1)]), &
                            'the gathered pieces of growing length')

    packed = 0
    if (nb) then
      call tether_iallgatherv(mine, r + 1, TETHER_DOUBLE_PRECISION, packed, counts, displs, TETHER_DOUBLE_PRECISION, &
                              comm, req, ierr)
    else
      call tether_allgatherv(mine, r + 1, TETHER_DOUBLE_PRECISION, packed, counts, displs, TETHER_DOUBLE_PRECISION, &
                             comm, ierr)
    end if
    call finish(nb, req, 'allgatherv')
    call expect(all(packed == [((j + i / 10.0_real64, i = 1, j + 1), j = 0, p - 1)]), 'allgatherv everywhere')

    c = cmplx(r, -r, real32)
    if (nb) then
      call tether_iallgather(c, 1, TETHER_COMPLEX, every, 1, TETHER_COMPLEX, comm, req, ierr)
    else
      call tether_allgather(c, 1, TETHER_COMPLEX, every, 1, TETHER_COMPLEX, comm, ierr)
    end if
    call finish(nb, req, 'allgather')
    call expect(all(every == [(cmplx(j, -j, real32), j = 0, p - 1)]), 'allgather of complex scalars')
  end subroutine gathers

  ! scatter and scatterv from the last rank.
  subroutine scatters(comm, nb, r, p)
    integer, intent(in) :: comm, r, p
    logical, intent(in) :: nb
    integer, asynchronous :: blocks(3, p), three(3), counts(p), displs(p)
    real(real32), asynchronous :: pieces(p * (p + 1) / 2), mine(r + 1)
    integer :: req, j, i
    blocks = reshape([(j, j = 1, 3 * p)], shape(blocks))
    if (nb) then
      call tether_iscatter(blocks, 3, TETHER_INTEGER, three, 3, TETHER_INTEGER, p - 1, comm, req, ierr)
    else
      call tether_scatter(blocks, 3, TETHER_INTEGER, three, 3, TETHER_INTEGER, p - 1, comm, ierr)
    end if
    call finish(nb, req, 'scatter')
    call expect(all(three == [(3 * r + i, i = 1, 3)]), 'my block of the scatter')

    counts = [(j, j = 1, p)]
    displs = [(j * (j - 1) / 2, j = 1, p)]
    pieces = [((real(j, real32) + i, i = 1, j + 1), j = 0, p - 1)]
    if (nb) then
      call tether_iscatterv(pieces, counts, displs, TETHER_REAL, mine, r + 1, TETHER_REAL, p - 1, comm, req, ierr)
    else
      call tether_scatterv(pieces, counts, displs, TETHER_REAL, mine, r + 1, TETHER_REAL, p - 1, comm, ierr)
    end if
    call finish(nb, req, 'scatterv')
    call expect(all(mine == [(real(r, real32) + i, i = 1, r + 1)]), 'my piece of the scatterv')
  end subroutine scatters

  ! alltoall (2 integers per pair) and alltoallv (rank k gets k+1 from each).
  subroutine all_to_all(comm, nb, r, p)
    integer, intent(in) :: comm, r, p
    logical, intent(in) :: nb
    integer, asynchronous :: out(2, p), in(2, p), scounts(p), sdispls(p), rcounts(p), rdispls(p)
    integer(int64), asynchronous :: vout(p * (p + 1) / 2), vin(p * (r + 1))
    integer :: req, j, i
    out = reshape([((100 * r + j, i = 1, 2), j = 0, p - 1)], shape(out))
    if (nb) then
      call tether_ialltoall(out, 2, TETHER_INTEGER, in, 2, TETHER_INTEGER, comm, req, ierr)
    else
      call tether_alltoall(out, 2, TETHER_INTEGER, in, 2, TETHER_INTEGER, comm, ierr)
    end if
    call finish(nb, req, 'alltoall')
    call expect(all(in == reshape([((100 * j + r, i = 1, 2), j = 0, p - 1)], shape(in))), 'alltoall blocks')

    scounts = [(j, j = 1, p)]
    sdispls = [(j * (j - 1) / 2, j = 1, p)]
    rcounts = r + 1
    rdispls = [(j * (r + 1), j = 0, p - 1)]
    vout = [((1000_int64 * r + j, i = 1, j + 1), j = 0, p - 1)]
    if (nb) then
      call tether_ialltoallv(vout, scounts, sdispls, TETHER_INT64, vin, rcounts, rdispls, TETHER_INT64, comm, req, ierr)
    else
      call tether_alltoallv(vout, scounts, sdispls, TETHER_INT64, vin, rcounts, rdispls, TETHER_INT64, comm, ierr)
    end if
    call finish(nb, req, 'alltoallv')
    call expect(all(vin == [((1000_int64 * j + r, i = 1, r + 1), j = 0, p - 1)]), 'alltoallv pieces')
  end subroutine all_to_all
end program coll_suite
