# Included after every project() call of the llama-cpp-python build (CMAKE_PROJECT_INCLUDE, set by
# scripts/llama_runtime.py). llama-cpp-python forces LLAMA_BUILD_COMMON on, yet its Python package loads only
# libllama and libggml*: llama.cpp's `common` library (chat parsers, jinja, arg parsing, an HTTP client: about half
# of the objects) was compiled and never installed. Forced off again when llama.cpp's own project() runs, after
# llama-cpp-python's setting, it is left out of the build. The installed libraries are the same targets as before.
if(PROJECT_NAME STREQUAL "llama.cpp")
  set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
endif()
