// Compiled into a layer library that has no sources yet, so that CMake can still create its target.
