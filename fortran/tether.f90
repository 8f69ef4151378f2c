! The `tether` Fortran module (DESIGN 3.10): `use tether` gives every
! constant of include/tether.h, the special arguments TETHER_IN_PLACE,
! TETHER_STATUS_IGNORE and TETHER_STATUSES_IGNORE, and every routine of the
! C API as a subroutine with a trailing `ierr`:
!
!   call tether_isend(buf, count, TETHER_DOUBLE_PRECISION, dest, tag, comm, req, ierr)
!
! Buffers are assumed-type, assumed-rank (scalars and contiguous arrays of
! any type, kind and rank); handles and constants are default integers;
! counts are default integers or integer(8). Errors reach `ierr`, never an
! abort: TETHER_SUCCESS or an error class, with tether_last_error saying
! what exactly went wrong. See docs/fortran.md.
!
! The routines live in one module per concern (tether_setup, tether_p2p,
! tether_collectives, tether_fields, tether_onesided, tether_active, over
! tether_c, the C API, and tether_support); this module is the one users
! name.
module tether
  use tether_c, only: TETHER_SUCCESS, TETHER_ERR_ARG, TETHER_ERR_COUNT, TETHER_ERR_RANK, TETHER_ERR_TAG, &
      TETHER_ERR_COMM, TETHER_ERR_TYPE, TETHER_ERR_OP, TETHER_ERR_REQUEST, TETHER_ERR_TRUNCATE, &
      TETHER_ERR_NOT_INITIALIZED, TETHER_ERR_INIT, TETHER_ERR_TIMEOUT, TETHER_ERR_PEER_LOST, &
      TETHER_ERR_PROTOCOL, TETHER_ERR_AUTH, TETHER_ERR_TRANSPORT, TETHER_ERR_UNKNOWN_HINT, &
      TETHER_ERR_HINT_VALUE, TETHER_ERR_RMA_RANGE, TETHER_ERR_FIELD_MISMATCH, TETHER_ERR_NO_MEM, &
      TETHER_ERR_FILE, TETHER_ERR_CANCELLED, TETHER_ERR_INTERNAL, &
      TETHER_ANY_SOURCE, TETHER_ANY_TAG, TETHER_TAG_UB, TETHER_UNDEFINED, TETHER_MAX_PROGRAM_NAME, &
      TETHER_MAX_ERROR_STRING, TETHER_REQUEST_NULL, TETHER_COMM_UNIVERSE, TETHER_COMM_NULL, &
      TETHER_BYTE, TETHER_CHAR, TETHER_INT8, TETHER_INT16, TETHER_INT32, TETHER_INT64, TETHER_UINT8, &
      TETHER_UINT16, TETHER_UINT32, TETHER_UINT64, TETHER_INT, TETHER_LONG, TETHER_LONG_LONG, &
      TETHER_FLOAT, TETHER_DOUBLE, TETHER_FLOAT_COMPLEX, TETHER_DOUBLE_COMPLEX, TETHER_FLOAT_INT, &
      TETHER_DOUBLE_INT, TETHER_2INT, TETHER_INTEGER, TETHER_REAL, TETHER_DOUBLE_PRECISION, &
      TETHER_COMPLEX, TETHER_LOGICAL, TETHER_CHARACTER, TETHER_2INTEGER, TETHER_2REAL, TETHER_2DOUBLE_PRECISION, &
      TETHER_SUM, TETHER_PROD, TETHER_MIN, TETHER_MAX, TETHER_LAND, TETHER_LOR, TETHER_LXOR, &
      TETHER_BAND, TETHER_BOR, TETHER_BXOR, TETHER_MINLOC, TETHER_MAXLOC, TETHER_REPLACE, TETHER_NO_OP, &
      TETHER_STATUS_SIZE, TETHER_SOURCE, TETHER_TAG, TETHER_ERROR, &
      TETHER_DIST_NULL, TETHER_FIELD_NULL, TETHER_DIST_BLOCK, TETHER_DIST_CYCLIC, &
      TETHER_DIST_BLOCK_CYCLIC, TETHER_DIST_NONE, TETHER_ORDER_C, TETHER_ORDER_FORTRAN, &
      TETHER_FIELD_MODE_PUT, TETHER_FIELD_MODE_GET, TETHER_WIN_NULL
  use tether_support, only: TETHER_IN_PLACE, TETHER_STATUS_IGNORE, TETHER_STATUSES_IGNORE
  use tether_setup
  use tether_p2p
  use tether_collectives
  use tether_fields
  use tether_onesided
  use tether_active
  implicit none
  public
end module tether
