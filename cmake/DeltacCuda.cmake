#===- DeltacCuda.cmake - locate the CUDA toolkit pieces deltac uses -----===#
#
# deltac needs no CUDA to build: ptxas and fatbinary only check and package
# generated PTX, cuda.h only declares the driver API the runtime dlopens.
# Sets DELTAC_PTXAS, DELTAC_FATBINARY, DELTAC_CUDA_INCLUDE_DIR (or leaves them
# empty) and says what is skipped without them.
#
#===--------------------------------------------------------------------===#
set(_deltac_cuda_hints)
if(DEFINED ENV{CUDA_HOME})
  list(APPEND _deltac_cuda_hints "$ENV{CUDA_HOME}")
endif()
list(APPEND _deltac_cuda_hints /usr/local/cuda)

find_program(DELTAC_PTXAS ptxas HINTS ${_deltac_cuda_hints} PATH_SUFFIXES bin
             NO_DEFAULT_PATH)
find_program(DELTAC_FATBINARY fatbinary HINTS ${_deltac_cuda_hints}
             PATH_SUFFIXES bin NO_DEFAULT_PATH)
find_path(DELTAC_CUDA_INCLUDE_DIR cuda.h HINTS ${_deltac_cuda_hints}
          PATH_SUFFIXES include NO_DEFAULT_PATH)

if(DELTAC_PTXAS)
  message(STATUS "deltac: ptxas ${DELTAC_PTXAS}")
else()
  message(STATUS "deltac: no ptxas (set CUDA_HOME): PTX is emitted but not "
                 "assembled; ptxas lit tests are skipped")
endif()
if(NOT DELTAC_FATBINARY)
  message(STATUS "deltac: no fatbinary: libraries embed PTX only")
endif()
if(NOT DELTAC_CUDA_INCLUDE_DIR)
  message(STATUS "deltac: no cuda.h: the runtime uses its own driver "
                 "declarations")
endif()
