// The SDK's version and the compiler a plugin is built with, for moe_build_info (ABI 1.2).
// kSdkVersion equals the CMake project version (checked at configure time).
#pragma once

#define MOE_REGISTRY_SDK_VERSION "0.2.0"

namespace moe::sdk {

inline constexpr const char* kSdkVersion = MOE_REGISTRY_SDK_VERSION;

#if defined(__clang__)
inline constexpr const char* kCompiler = "clang " __clang_version__;
#elif defined(__GNUC__)
inline constexpr const char* kCompiler = "g++ " __VERSION__;
#else
inline constexpr const char* kCompiler = "unknown";
#endif

}  // namespace moe::sdk
