! Fields (DESIGN 3.8, 3.10): a distributed array put by one program and got
! by others, step after step, as Fortran subroutines with a trailing ierr.
!
! Extents, blocks, box starts and counts and steps are integer(8); box
! starts are 0-based, as in every language. Pass TETHER_ORDER_FORTRAN for
! arrays stored first-index-fastest and a process grid numbered that way
! (rank = c0 + P0*(c1 + P1*c2)). The modes are TETHER_FIELD_MODE_PUT and
! TETHER_FIELD_MODE_GET (Fortran ignores case, so TETHER_FIELD_PUT would
! clash with tether_field_put). The local part is an assumed-type,
! assumed-rank contiguous array; for a non-blocking step it must stay in
! place until the request completes (give it `asynchronous` or `target`).
module tether_fields
  use, intrinsic :: iso_c_binding, only: c_ptr, c_int, c_int64_t, c_loc, c_null_ptr
  use, intrinsic :: iso_fortran_env, only: int64
  use tether_c
  use tether_support
  implicit none
  private
  public :: tether_dist_create, tether_dist_create_boxes, tether_dist_local_shape, tether_dist_free
  public :: tether_field_create, tether_field_put, tether_field_iput, tether_field_get
  public :: tether_field_iget, tether_field_free

contains

  ! A regular distribution: kinds(d) is TETHER_DIST_BLOCK, _CYCLIC,
  ! _BLOCK_CYCLIC (block blocks(d)) or _NONE, over a grid whose product is
  ! this program's joined processes.
  subroutine tether_dist_create(ndims, global_shape, proc_grid, kinds, blocks, order, dist, ierr)
    integer, intent(in) :: ndims, order
    integer(int64), intent(in) :: global_shape(ndims)
    integer, intent(in) :: proc_grid(ndims), kinds(ndims)
    integer(int64), target, intent(in) :: blocks(ndims)
    integer, intent(out) :: dist, ierr
    integer(c_int) :: handle
    integer(c_int) :: grid(ndims), k(ndims)
    grid = proc_grid
    k = kinds
    ierr = c_dist_create(int(ndims, c_int), global_shape, grid, k, c_loc(blocks), int(order, c_int), handle)
    if (ierr == TETHER_SUCCESS) dist = handle
  end subroutine tether_dist_create

  ! This process's part as nboxes boxes: starts(:, b) and counts(:, b)
  ! are box b's 0-based first index and extents.
  subroutine tether_dist_create_boxes(ndims, global_shape, nboxes, starts, counts, order, dist, ierr)
    integer, intent(in) :: ndims, nboxes, order
    integer(int64), intent(in) :: global_shape(ndims)
    integer(int64), intent(in) :: starts(ndims, *), counts(ndims, *)
    integer, intent(out) :: dist, ierr
    integer(c_int) :: handle
    integer(int64) :: none(1)
    none = 0
    if (nboxes > 0) then
      ierr = c_dist_create_boxes(int(ndims, c_int), global_shape, int(nboxes, c_int), starts(:, 1:nboxes), &
          counts(:, 1:nboxes), int(order, c_int), handle)
    else
      ierr = c_dist_create_boxes(int(ndims, c_int), global_shape, 0_c_int, none, none, int(order, c_int), handle)
    end if
    if (ierr == TETHER_SUCCESS) dist = handle
  end subroutine tether_dist_create_boxes

  ! This process's local extents (ndims values).
  subroutine tether_dist_local_shape(dist, shape, ierr)
    integer, intent(in) :: dist
    integer(int64), intent(out) :: shape(*)
    integer, intent(out) :: ierr
    ierr = c_dist_local_shape(int(dist, c_int), shape)
  end subroutine tether_dist_local_shape

  subroutine tether_dist_free(dist, ierr)
    integer, intent(inout) :: dist
    integer, intent(out) :: ierr
    integer(c_int) :: handle
    handle = dist
    ierr = c_dist_free(handle)
    if (ierr == TETHER_SUCCESS) dist = handle
  end subroutine tether_dist_free

  ! Creates field `name`; peers names the consumer programs (comma-separated)
  ! for TETHER_FIELD_MODE_PUT, the producer for TETHER_FIELD_MODE_GET.
  subroutine tether_field_create(name, datatype, dist, peers, mode, field, ierr)
    character(len=*), intent(in) :: name, peers
    integer, intent(in) :: datatype, dist, mode
    integer, intent(out) :: field, ierr
    integer(c_int) :: handle
    ierr = c_field_create(c_string(name), int(datatype, c_int), int(dist, c_int), c_string(peers), &
        int(mode, c_int), handle)
    if (ierr == TETHER_SUCCESS) field = handle
  end subroutine tether_field_create

  ! The address of a local part: NULL for an empty one.
  subroutine local_address(local, ptr, ierr)
    type(*), dimension(..), target, intent(in) :: local
    type(c_ptr), intent(out) :: ptr
    integer, intent(out) :: ierr
    if (size(local) == 0) then
      ptr = c_null_ptr
      ierr = TETHER_SUCCESS
    else
      call buffer_address(local, ptr, ierr)
    end if
  end subroutine local_address

  ! Puts step `step`: returns once the step is queued.
  subroutine tether_field_put(field, step, local, ierr)
    integer, intent(in) :: field
    integer(int64), intent(in) :: step
    type(*), dimension(..), target, intent(in) :: local
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    call local_address(local, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_field_put(int(field, c_int), int(step, c_int64_t), p)
  end subroutine tether_field_put

  subroutine tether_field_iput(field, step, local, req, ierr)
    integer, intent(in) :: field
    integer(int64), intent(in) :: step
    type(*), dimension(..), target, intent(in) :: local
    integer, intent(out) :: req, ierr
    type(c_ptr) :: p
    integer(c_int) :: r
    call local_address(local, p, ierr)
    if (ierr /= TETHER_SUCCESS) return
    ierr = c_field_iput(int(field, c_int), int(step, c_int64_t), p, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine tether_field_iput

  ! Gets step `step` (the producer's next) into `local`.
  subroutine tether_field_get(field, step, local, ierr)
    integer, intent(in) :: field
    integer(int64), intent(in) :: step
    type(*), dimension(..), target, intent(inout) :: local
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    call local_address(local, p, ierr)
    if (ierr == TETHER_SUCCESS) ierr = c_field_get(int(field, c_int), int(step, c_int64_t), p)
  end subroutine tether_field_get

  subroutine tether_field_iget(field, step, local, req, ierr)
    integer, intent(in) :: field
    integer(int64), intent(in) :: step
    type(*), dimension(..), target, intent(inout) :: local
    integer, intent(out) :: req, ierr
    type(c_ptr) :: p
    integer(c_int) :: r
    call local_address(local, p, ierr)
    if (ierr /= TETHER_SUCCESS) return
    ierr = c_field_iget(int(field, c_int), int(step, c_int64_t), p, r)
    if (ierr == TETHER_SUCCESS) req = r
  end subroutine tether_field_iget

  ! Frees a field: a producer first delivers what is queued.
  subroutine tether_field_free(field, ierr)
    integer, intent(inout) :: field
    integer, intent(out) :: ierr
    integer(c_int) :: handle
    handle = field
    ierr = c_field_free(handle)
    if (ierr == TETHER_SUCCESS) field = handle
  end subroutine tether_field_free

end module tether_fields
