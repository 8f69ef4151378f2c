! The Fortran half of the mixed-language test (the C half is
! tests/c/fortran_peer.c): programs `fcode` and `ccode` of the same size
! build one communicator, fcode's ranks first; fcode rank i sends a 3-D
! array in Fortran order to ccode rank i, which answers with the array's
! sum and the array doubled, in C's types. Both sides check what they got.
! Then an allreduce over both programs: Fortran's TETHER_DOUBLE_PRECISION
! and TETHER_INTEGER meet C's TETHER_DOUBLE and TETHER_INT.
program mixed
  use, intrinsic :: iso_fortran_env, only: real64
  use tether
  use checks
  implicit none
  integer :: ierr, ids(2), comm, r, p, i, j, k, status(TETHER_STATUS_SIZE)
  real(real64) :: a(2, 3, 4), back(2, 3, 4), total, sums(2)
  integer :: counts(2)

  call tether_init(ierr)
  call check(ierr, 'tether_init')
  call tether_program_find('fcode', ids(1), ierr)
  call check(ierr, 'program_find fcode')
  call tether_program_find('ccode', ids(2), ierr)
  call check(ierr, 'program_find ccode')
  call tether_comm_create(2, ids, comm, ierr)
  call check(ierr, 'comm_create')
  call tether_comm_rank(comm, r, ierr)
  call check(ierr, 'comm_rank')
  call tether_comm_size(comm, p, ierr)
  call check(ierr, 'comm_size')

  do k = 1, 4
    do j = 1, 3
      do i = 1, 2
        a(i, j, k) = i + 10 * j + 100 * k + 1000 * r
      end do
    end do
  end do
  call tether_send(a, size(a), TETHER_DOUBLE_PRECISION, r + p / 2, 1, comm, ierr)
  call check(ierr, 'send to C')
  call tether_recv(total, 1, TETHER_DOUBLE_PRECISION, r + p / 2, 2, comm, status, ierr)
  call check(ierr, 'recv the sum from C')
  call tether_recv(back, size(back), TETHER_DOUBLE_PRECISION, r + p / 2, 3, comm, TETHER_STATUS_IGNORE, ierr)
  call check(ierr, 'recv the doubled array from C')
  call expect(total == sum(a) .and. all(back == 2 * a), 'the sum and the doubled array from C')
  call tether_allreduce([total, 1.0_real64], sums, 2, TETHER_DOUBLE_PRECISION, TETHER_SUM, comm, ierr)
  call check(ierr, 'allreduce with C')
  call tether_allreduce([r, 1], counts, 2, TETHER_INTEGER, TETHER_SUM, comm, ierr)
  call check(ierr, 'allreduce of integers with C')
  call expect(sums(1) == 2 * (6516 + 30516) .and. sums(2) == p .and. all(counts == [p * (p - 1) / 2, p]), &
              'sums over both programs')
  call tether_comm_free(comm, ierr)
  call check(ierr, 'comm_free')
  call tether_finalize(ierr)
  call check(ierr, 'tether_finalize')
  print '("fortran got ", f0.1, " from C")', total
end program mixed
