! Start-up, the universe, communicators, errors and hints: DESIGN 3.1,
! 3.2 and 3.6 as Fortran subroutines. Each mirrors its C twin with a
! trailing `ierr` (TETHER_SUCCESS or an error class); outputs are written
! only on success. Flags are `logical`, as in MPI's Fortran bindings.
module tether_setup
  use, intrinsic :: iso_c_binding, only: c_int, c_char, c_null_ptr
  use tether_c
  use tether_support, only: c_string, fortran_string
  implicit none
  private
  public :: tether_init, tether_init_as, tether_finalize, tether_initialized, tether_abort
  public :: tether_universe_rank, tether_universe_size
  public :: tether_program_count, tether_program_id, tether_program_rank, tether_program_size
  public :: tether_program_name, tether_program_find, tether_program_universe_rank
  public :: tether_comm_create, tether_comm_create_ranks, tether_comm_rank, tether_comm_size
  public :: tether_comm_universe_rank, tether_comm_free
  public :: tether_error_string, tether_last_error, tether_hint, tether_hint_get
  public :: tether_kernel_begin, tether_kernel_end

contains

  ! Joins the universe with the identity from the environment (DESIGN 3.9).
  subroutine tether_init(ierr)
    integer, intent(out) :: ierr
    ierr = c_init(c_null_ptr, c_null_ptr)
  end subroutine tether_init

  ! Joins as rank `rank` of program `program`, which has `size` joining
  ! processes. An MPI program passes its MPI rank and size.
  subroutine tether_init_as(program, rank, size, ierr)
    character(len=*), intent(in) :: program
    integer, intent(in) :: rank, size
    integer, intent(out) :: ierr
    ierr = c_init_as(c_string(program), rank, size)
  end subroutine tether_init_as

  subroutine tether_finalize(ierr)
    integer, intent(out) :: ierr
    ierr = c_finalize()
  end subroutine tether_finalize

  subroutine tether_initialized(flag, ierr)
    logical, intent(out) :: flag
    integer, intent(out) :: ierr
    integer(c_int) :: f
    ierr = c_initialized(f)
    if (ierr == TETHER_SUCCESS) flag = f /= 0
  end subroutine tether_initialized

  ! Ends every process of the universe with exit code `code`.
  subroutine tether_abort(code, ierr)
    integer, intent(in) :: code
    integer, intent(out) :: ierr
    ierr = c_abort(code)
  end subroutine tether_abort

  subroutine tether_universe_rank(rank, ierr)
    integer, intent(out) :: rank, ierr
    integer(c_int) :: v
    ierr = c_universe_rank(v)
    if (ierr == TETHER_SUCCESS) rank = v
  end subroutine tether_universe_rank

  subroutine tether_universe_size(size, ierr)
    integer, intent(out) :: size, ierr
    integer(c_int) :: v
    ierr = c_universe_size(v)
    if (ierr == TETHER_SUCCESS) size = v
  end subroutine tether_universe_size

  subroutine tether_program_count(count, ierr)
    integer, intent(out) :: count, ierr
    integer(c_int) :: v
    ierr = c_program_count(v)
    if (ierr == TETHER_SUCCESS) count = v
  end subroutine tether_program_count

  ! My program's id, 0..count-1: its index among the programs by name.
  subroutine tether_program_id(id, ierr)
    integer, intent(out) :: id, ierr
    integer(c_int) :: v
    ierr = c_program_id(v)
    if (ierr == TETHER_SUCCESS) id = v
  end subroutine tether_program_id

  subroutine tether_program_rank(rank, ierr)
    integer, intent(out) :: rank, ierr
    integer(c_int) :: v
    ierr = c_program_rank(v)
    if (ierr == TETHER_SUCCESS) rank = v
  end subroutine tether_program_rank

  subroutine tether_program_size(id, size, ierr)
    integer, intent(in) :: id
    integer, intent(out) :: size, ierr
    integer(c_int) :: v
    ierr = c_program_size(id, v)
    if (ierr == TETHER_SUCCESS) size = v
  end subroutine tether_program_size

  ! Universe rank of rank `rank` of program `id` (ranks of the programs,
  ! ordered by name, concatenated). TETHER_ERR_ARG for an id outside
  ! 0..count-1, TETHER_ERR_RANK for a rank outside 0..size-1 of program id.
  subroutine tether_program_universe_rank(id, rank, universe_rank, ierr)
    integer, intent(in) :: id, rank
    integer, intent(out) :: universe_rank, ierr
    integer(c_int) :: v
    ierr = c_program_universe_rank(id, rank, v)
    if (ierr == TETHER_SUCCESS) universe_rank = v
  end subroutine tether_program_universe_rank

  ! Name of program `id`, blank-padded; TETHER_ERR_ARG if `name` is
  ! shorter than the name (TETHER_MAX_PROGRAM_NAME - 1 always suffices).
  subroutine tether_program_name(id, name, ierr)
    integer, intent(in) :: id
    character(len=*), intent(inout) :: name
    integer, intent(out) :: ierr
    character(kind=c_char) :: chars(len(name) + 1)
    ierr = c_program_name(id, chars, size(chars))
    if (ierr == TETHER_SUCCESS) call fortran_string(chars, name)
  end subroutine tether_program_name

  ! Id of the program called `name` (trailing blanks ignored).
  subroutine tether_program_find(name, id, ierr)
    character(len=*), intent(in) :: name
    integer, intent(out) :: id, ierr
    integer(c_int) :: v
    ierr = c_program_find(c_string(name), v)
    if (ierr == TETHER_SUCCESS) id = v
  end subroutine tether_program_find

  ! A communicator of every joined process of the programs listed, ranked
  ! program by program in the order given; collective over those
  ! processes, TETHER_COMM_NULL at once for the others.
  subroutine tether_comm_create(nprograms, programs, comm, ierr)
    integer, intent(in) :: nprograms, programs(*)
    integer, intent(out) :: comm, ierr
    integer(c_int) :: v
    ierr = c_comm_create(nprograms, programs, v)
    if (ierr == TETHER_SUCCESS) comm = v
  end subroutine tether_comm_create

  ! A communicator whose rank i is universe rank ranks(i + 1).
  subroutine tether_comm_create_ranks(n, ranks, comm, ierr)
    integer, intent(in) :: n, ranks(*)
    integer, intent(out) :: comm, ierr
    integer(c_int) :: v
    ierr = c_comm_create_ranks(n, ranks, v)
    if (ierr == TETHER_SUCCESS) comm = v
  end subroutine tether_comm_create_ranks

  subroutine tether_comm_rank(comm, rank, ierr)
    integer, intent(in) :: comm
    integer, intent(out) :: rank, ierr
    integer(c_int) :: v
    ierr = c_comm_rank(comm, v)
    if (ierr == TETHER_SUCCESS) rank = v
  end subroutine tether_comm_rank

  subroutine tether_comm_size(comm, size, ierr)
    integer, intent(in) :: comm
    integer, intent(out) :: size, ierr
    integer(c_int) :: v
    ierr = c_comm_size(comm, v)
    if (ierr == TETHER_SUCCESS) size = v
  end subroutine tether_comm_size

  subroutine tether_comm_universe_rank(comm, rank, universe_rank, ierr)
    integer, intent(in) :: comm, rank
    integer, intent(out) :: universe_rank, ierr
    integer(c_int) :: v
    ierr = c_comm_universe_rank(comm, rank, v)
    if (ierr == TETHER_SUCCESS) universe_rank = v
  end subroutine tether_comm_universe_rank

  ! Frees `comm` and sets it to TETHER_COMM_NULL.
  subroutine tether_comm_free(comm, ierr)
    integer, intent(inout) :: comm
    integer, intent(out) :: ierr
    ierr = c_comm_free(comm)
  end subroutine tether_comm_free

  ! Name and meaning of error class `code`, cut to len(string).
  subroutine tether_error_string(code, string, ierr)
    integer, intent(in) :: code
    character(len=*), intent(inout) :: string
    integer, intent(out) :: ierr
    character(kind=c_char) :: chars(TETHER_MAX_ERROR_STRING)
    ierr = c_error_string(code, chars, size(chars))
    if (ierr == TETHER_SUCCESS) call fortran_string(chars, string)
  end subroutine tether_error_string

  ! This thread's last detailed error message (which peer, which size),
  ! cut to len(string); blank when there was none.
  subroutine tether_last_error(string, ierr)
    character(len=*), intent(inout) :: string
    integer, intent(out) :: ierr
    character(kind=c_char) :: chars(TETHER_MAX_ERROR_STRING)
    ierr = c_last_error(chars, size(chars))
    if (ierr == TETHER_SUCCESS) call fortran_string(chars, string)
  end subroutine tether_last_error

  ! Sets hint `key` to `value` (trailing blanks ignored in both).
  subroutine tether_hint(key, value, ierr)
    character(len=*), intent(in) :: key, value
    integer, intent(out) :: ierr
    ierr = c_hint(c_string(key), c_string(value))
  end subroutine tether_hint

  ! The effective value of setting `key`, blank-padded; TETHER_ERR_ARG if
  ! `value` is too short for it.
  subroutine tether_hint_get(key, value, ierr)
    character(len=*), intent(in) :: key
    character(len=*), intent(inout) :: value
    integer, intent(out) :: ierr
    character(kind=c_char) :: chars(len(value) + 1)
    ierr = c_hint_get(c_string(key), chars, size(chars))
    if (ierr == TETHER_SUCCESS) call fortran_string(chars, value)
  end subroutine tether_hint_get

  ! A communication kernel starts: tether_hint('IN_KERNEL', '1') (the
  ! peers used until tether_kernel_end get fast, persistent links; waits
  ! spin instead of sleeping). Python's `with tether.kernel():` is the pair.
  subroutine tether_kernel_begin(ierr)
    integer, intent(out) :: ierr
    call tether_hint('IN_KERNEL', '1', ierr)
  end subroutine tether_kernel_begin

  ! The kernel ends: tether_hint('IN_KERNEL', '0').
  subroutine tether_kernel_end(ierr)
    integer, intent(out) :: ierr
    call tether_hint('IN_KERNEL', '0', ierr)
  end subroutine tether_kernel_end
end module tether_setup
