// Discovery and loading: every library that is not a usable plugin is skipped with a reason
// that names the file and the problem.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../support/scoped_env.hpp"
#include "../support/test_env.hpp"

namespace moe::test {
namespace {

const SkippedLibrary* skipped_containing(const Registry& r, const std::string& text) {
  for (const auto& s : r.skipped())
    if (s.reason.find(text) != std::string::npos) return &s;
  return nullptr;
}

TEST(Registry, FindsTheReferenceInTheBuildTree) {
  const Registry r = registry_of({build_plugin_dir()});
  ASSERT_NE(r.find("reference"), nullptr);
  EXPECT_EQ(r.find("reference")->api().abi_major, MOE_ABI_VERSION_MAJOR);
  EXPECT_TRUE(r.skipped().empty());
}

TEST(Registry, MissingPluginDirectoryIsAnErrorNamingIt) {
  expect_error([] { registry_of({"/no/such/plugins"}); }, MOE_STATUS_NOT_FOUND,
               {"plugin directory '/no/such/plugins'", "does not exist"});
}

// A file where a directory belongs, and a directory where a library file belongs: each named
// for what it is, not as missing.
TEST(Registry, APathOfTheWrongKindIsNamedForWhatItIs) {
  const auto file = std::filesystem::path(testing::TempDir()) / "moe_plugin_dir_as_file";
  std::ofstream(file) << "a file\n";
  expect_error([&] { registry_of({file.string()}); }, MOE_STATUS_NOT_FOUND,
               {"plugin directory '" + file.string() + "' (from plugin_dirs) is not a directory"});
  DiscoveryOptions d;
  d.use_env = false;
  d.use_default = false;
  d.files = {testing::TempDir()};
  expect_error([&] { Registry::discover(d); }, MOE_STATUS_NOT_FOUND,
               {"not a regular file (a plugin is a shared library)"});
}

// The core's plugin directory given by the caller must exist, as plugin_dirs must; the
// environment's MOE_CORE_PLUGIN_DIR is a hint, ignored with a warning when it does not.
TEST(Registry, AnExplicitCorePluginDirectoryMustExist) {
  DiscoveryOptions d;
  d.use_env = false;
  d.use_default = false;
  d.core_plugin_dir = "/no/such/core/plugins";
  expect_error([&] { Registry::discover(d); }, MOE_STATUS_NOT_FOUND,
               {"core plugin directory '/no/such/core/plugins' (from core_plugin_dir) does not "
                "exist"});
  const auto file = std::filesystem::path(testing::TempDir()) / "moe_core_plugin_dir_as_file";
  std::ofstream(file) << "a file\n";
  d.core_plugin_dir = file.string();
  expect_error([&] { Registry::discover(d); }, MOE_STATUS_NOT_FOUND,
               {"(from core_plugin_dir) is not a directory"});
  d.core_plugin_dir.clear();
  ScopedEnv env("MOE_CORE_PLUGIN_DIR", "/no/such/core/plugins");
  EXPECT_NO_THROW(Registry::discover(d));
}

TEST(Registry, FileThatIsNotASharedLibraryIsSkippedWithTheReason) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "moe_not_a_library";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "libfake.so") << "this is text, not ELF\n";
  const Registry r = registry_of({dir.string()});
  EXPECT_TRUE(r.plugins().empty());
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_THAT(r.skipped()[0].reason, testing::HasSubstr("libfake.so"));
  EXPECT_THAT(r.skipped()[0].reason, testing::HasSubstr("not a shared library"));
}

TEST(Registry, TruncatedLibraryIsSkippedWithTheLoaderMessage) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "moe_truncated";
  std::filesystem::create_directories(dir);
  std::ifstream in(build_plugin_dir() + "/libmoe_reference.so", std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), head.size());
  std::ofstream(dir / "libtruncated.so", std::ios::binary) << head;
  const Registry r = registry_of({dir.string()});
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_THAT(r.skipped()[0].reason, testing::HasSubstr("libtruncated.so: truncated or corrupt"));
}

TEST(Registry, LibraryWithoutTheEntryPointIsSkipped) {
  const Registry r = registry_of({fixture_dir("no_entry")});
  EXPECT_TRUE(r.plugins().empty());
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_THAT(r.skipped()[0].reason, testing::HasSubstr("has no entry point 'moe_plugin_get_api'"));
}

TEST(Registry, PluginOfAnotherAbiMajorIsRefusedNamingBothVersions) {
  const Registry r = registry_of({fixture_dir("abi_major_99")});
  EXPECT_TRUE(r.plugins().empty());
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_THAT(r.skipped()[0].reason, testing::HasSubstr("plugin ABI 99."));
  EXPECT_THAT(r.skipped()[0].reason,
              testing::HasSubstr(
                  fmt::format("core's ABI {}.{}", MOE_ABI_VERSION_MAJOR, MOE_ABI_VERSION_MINOR)));
}

TEST(Registry, FunctionTableShorterThanTheMinimumIsRefused) {
  const Registry r = registry_of({fixture_dir("short_table")});
  EXPECT_TRUE(r.plugins().empty());
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_THAT(r.skipped()[0].reason, testing::HasSubstr("function table struct_size="));
  EXPECT_THAT(r.skipped()[0].reason, testing::HasSubstr("smaller than the minimum"));
}

// (A duplicate of a built-in name is refused whatever the order: tests/core/builtin_test.cpp.)
TEST(Registry, DuplicateNameKeepsTheFirstFoundAndReportsTheOtherWithBothPaths) {
  const Registry r = registry_of({fixture_dir("works"), fixture_dir("works_again")});
  ASSERT_NE(r.find("fixture_works"), nullptr);
  EXPECT_THAT(r.find("fixture_works")->path().string(), testing::HasSubstr(fixture_dir("works")));
  const auto* s = skipped_containing(r, "duplicate plugin name 'fixture_works'");
  ASSERT_NE(s, nullptr);
  EXPECT_THAT(s->reason, testing::HasSubstr(fixture_dir("works_again") +
                                            "/libmoe_fixture_works_again.so: duplicate"));
  EXPECT_THAT(s->reason, testing::HasSubstr("already provided by " + fixture_dir("works") +
                                            "/libmoe_fixture_works.so"));
}

TEST(Registry, ExplicitPluginFileThatFailsToLoadIsAnError) {
  DiscoveryOptions o;
  o.files = {fixture_dir("abi_major_99") + "/libmoe_fixture_abi_major_99.so"};
  o.use_env = o.use_default = false;
  expect_error([&] { Registry::discover(o); }, MOE_STATUS_ABI_MISMATCH, {"plugin ABI 99."});
}

TEST(Registry, MoePluginPathIsSearched) {
  setenv("MOE_PLUGIN_PATH", (fixture_dir("picky") + ":/no/such/dir").c_str(), 1);
  DiscoveryOptions o;
  o.use_default = false;
  const Registry r = Registry::discover(o);
  unsetenv("MOE_PLUGIN_PATH");
  EXPECT_NE(r.find("fixture_picky"), nullptr);
}

TEST(Registry, AFileWhereMoePluginPathExpectsADirectoryIsAWarningNotAnAbort) {
  const auto file = std::filesystem::path(testing::TempDir()) / "moe_plugin_path_file";
  std::ofstream(file) << "not a directory\n";
  setenv("MOE_PLUGIN_PATH", (file.string() + ":" + fixture_dir("picky")).c_str(), 1);
  DiscoveryOptions o;
  o.use_default = false;
  testing::internal::CaptureStderr();
  const Registry r = Registry::discover(o);
  const std::string log = testing::internal::GetCapturedStderr();
  unsetenv("MOE_PLUGIN_PATH");
  EXPECT_THAT(log, testing::HasSubstr("MOE_PLUGIN_PATH entry '" + file.string() +
                                      "' is not a directory; ignored"));
  EXPECT_NE(r.find("fixture_picky"), nullptr);
}

// Root reads any directory, so the check runs as nobody, in a child (a death test) of its own.
TEST(Registry, AnUnreadableDirectoryIsAWarningNotAnAbort) {
  const pid_t probe = fork();
  if (probe == 0) _exit(geteuid() != 0 || setuid(65534) == 0 ? 0 : 1);
  int status = 0;
  waitpid(probe, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) GTEST_SKIP() << "cannot drop root here";
  const auto dir = std::filesystem::path(testing::TempDir()) / "moe_unreadable_plugins";
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::none);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (geteuid() == 0 && setuid(65534) != 0) std::exit(3);
        const Registry r = registry_of({dir.string(), fixture_dir("picky")});
        std::exit(r.find("fixture_picky") != nullptr ? 0 : 4);
      },
      testing::ExitedWithCode(0),
      "plugin directory '" + dir.string() + "' cannot be read \\(Permission denied\\); ignored");
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
}

TEST(Registry, AliasFindsThePlugin) {
  const Registry r = registry_of({fixture_dir("picky")});
  ASSERT_NE(r.find("fixture_picky_alias"), nullptr);
  EXPECT_EQ(r.find("fixture_picky_alias")->name(), "fixture_picky");
  EXPECT_EQ(r.find("nobody"), nullptr);
  EXPECT_THAT(r.names(), testing::HasSubstr("fixture_picky (fixture_picky_alias)"));
}

// Three libraries built from one source define the same internal symbols; with hidden
// visibility and RTLD_LOCAL each keeps its own (each reports its own name and behaviour).
TEST(Registry, PluginsBuiltFromTheSameCodeLoadSideBySide) {
  const Registry r =
      registry_of({fixture_dir("works"), fixture_dir("picky"), fixture_dir("throws")});
  ASSERT_EQ(r.plugins().size(), 3u);
  EXPECT_EQ(r.find("fixture_works")->info().priority, 1);
  EXPECT_EQ(r.find("fixture_picky")->info().priority, 5);
  EXPECT_FALSE(
      r.find("fixture_picky")->supports(small_problem(MOE_FORMAT_FP8_BLOCK).c()).supported);
  EXPECT_TRUE(r.find("fixture_works")->supports(small_problem(MOE_FORMAT_FP8_BLOCK).c()).supported);
}

TEST(Registry, DefaultDirectoriesIncludeTheBuildTree) {
  // The test binaries live in build/bin, so <exe>/../plugins is build/plugins.
  bool found = false;
  for (const auto& d : default_plugin_dirs())
    found = found || std::filesystem::equivalent(d, build_plugin_dir());
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace moe::test
