! Fortran (use mpi) calls reach picoll: MPI_ALLREDUCE (and in place), MPI_ALLGATHER, MPI_ALLTOALL,
! MPI_SEND/MPI_RECV and MPI_ISEND/MPI_IRECV/MPI_WAITALL in a ring, on host buffers, each result
! checked against a plain loop. Run with picoll preloaded, PICOLL_HOST=on and PICOLL_STATS=1: the
! CTest then checks that picoll's stats count the collectives under its own algorithms.
program f_calls
  use mpi
  implicit none
  integer, parameter :: n = 1000
  integer :: ierr, rank, nproc, i, p, fails, total, left, right
  integer :: a(n), b(n), req(2)
  integer, allocatable :: g(:), s(:), r(:)
  double precision :: d(n), e(n)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
  allocate(g(n * nproc), s(n * nproc), r(n * nproc))
  fails = 0
  do i = 1, n
    a(i) = rank * 7 + i
    d(i) = dble(rank) + dble(i) / 4d0
  end do

  call MPI_Allreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  do i = 1, n
    if (b(i) /= 7 * nproc * (nproc - 1) / 2 + nproc * i) fails = fails + 1
  end do
  call MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  do i = 1, n
    if (d(i) /= dble(nproc - 1) + dble(i) / 4d0) fails = fails + 1
  end do
  call MPI_Allgather(a, n, MPI_INTEGER, g, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do p = 0, nproc - 1
    do i = 1, n
      if (g(p * n + i) /= p * 7 + i) fails = fails + 1
    end do
  end do
  do p = 0, nproc - 1
    do i = 1, n
      s(p * n + i) = rank * 100000 + p * 1000 + i
    end do
  end do
  call MPI_Alltoall(s, n, MPI_INTEGER, r, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do p = 0, nproc - 1
    do i = 1, n
      if (r(p * n + i) /= p * 100000 + rank * 1000 + i) fails = fails + 1
    end do
  end do

  right = mod(rank + 1, nproc)
  left = mod(rank + nproc - 1, nproc)
  call MPI_Sendrecv(a, n, MPI_INTEGER, right, 1, b, n, MPI_INTEGER, left, 1, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
  do i = 1, n
    if (b(i) /= left * 7 + i) fails = fails + 1
  end do
  if (mod(rank, 2) == 0) then
    call MPI_Send(a, n, MPI_INTEGER, right, 2, MPI_COMM_WORLD, ierr)
    call MPI_Recv(b, n, MPI_INTEGER, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  else
    call MPI_Recv(b, n, MPI_INTEGER, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Send(a, n, MPI_INTEGER, right, 2, MPI_COMM_WORLD, ierr)
  end if
  do i = 1, n
    if (b(i) /= left * 7 + i) fails = fails + 1
  end do
  b = 0
  call MPI_Irecv(b, n, MPI_INTEGER, left, 3, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(a, n, MPI_INTEGER, right, 3, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Waitall(2, req, MPI_STATUSES_IGNORE, ierr)
  do i = 1, n
    if (b(i) /= left * 7 + i) fails = fails + 1
  end do

  call MPI_Reduce(fails, total, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total == 0) then
      print '(a,i0,a)', 'f_calls: passed on ', nproc, ' ranks'
    else
      print '(a,i0,a)', 'f_calls: FAILED, ', total, ' wrong values'
    end if
  end if
  call MPI_Finalize(ierr)
end program f_calls
