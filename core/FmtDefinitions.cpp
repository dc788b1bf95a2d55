// fmt's compiled part, built here once. Debian's libfmt-dev ships only a shared libfmt, which the
// archive may not need (it needs glibc alone, compat/glibc228), and fmt's header-only mode puts
// the whole formatter into every translation unit that includes it: measured on this machine,
// 1.2 s -> 7.0 s for a one-line user of fmt::format at -O3 and 0.8 s -> 27 s under
// -fsanitize=address,undefined, over some 90 such files. So every m3idx build compiles fmt's
// definitions (fmt/format-inl.h, as fmt's own src/format.cc does) in this one file and links them
// statically; the other files see fmt's declarations only.
#include <fmt/format-inl.h>

static_assert(FMT_VERSION / 10000 == 9, "core/FmtDefinitions.cpp follows fmt 9's src/format.cc");

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template FMT_API locale_ref::locale_ref(const std::locale &loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;

// What format.h declares `extern template` (FMT_HEADER_ONLY unset), for char and wchar_t.
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void buffer<char>::append(const char *, const char *);
template FMT_API void vformat_to(buffer<char> &, string_view, basic_format_args<FMT_BUFFER_CONTEXT(char)>,
                                 locale_ref);
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;
template FMT_API void buffer<wchar_t>::append(const wchar_t *, const wchar_t *);

} // namespace detail
FMT_END_NAMESPACE
