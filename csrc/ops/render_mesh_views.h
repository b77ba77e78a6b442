// render_mesh_views: z-buffer rasteriser of a triangle mesh seen from an N x M grid of cameras.
#pragma once

#include <cstdint>

namespace pyskick {

// World frame: Y up, the object's front faces +Z. The camera for (elevation e, azimuth a) sits at
//   C = distance * (-cos e sin a, sin e, cos e cos a)
// and looks at the origin; image right is (cos a, 0, sin a) and image up (sin a sin e, cos e,
// -cos a sin e). Azimuth 0 looks at the front; increasing azimuth moves the camera clockwise
// seen from above (+Z towards -X). Perspective with vertical = horizontal field of view fov_deg.
//
// vertices: [P, 3] float32; faces: [F, 3] int32 in [0, P); elevations_deg: [N]; azimuths_deg: [M];
// lights: [L, 4] float32 rows (dx, dy, dz, intensity), directions towards the light (non-zero).
// out: [N, M, H, W] float32 with H = W = image_size.
//
// Rules (the pure-PyTorch twin follows them operation for operation, in double precision):
// - Rendering happens at S = image_size * supersample; pixel (row i, col j) has its centre at
//   (j + 0.5, i + 0.5) in screen space, where sx = S/2 + f * xc / zc, sy = S/2 - f * yc / zc
//   and f = (S/2) / tan(fov/2).
// - A face with a vertex closer than kNearPlane to the camera plane is dropped (not clipped);
//   a face with zero screen area is dropped. Coverage is inclusive: a pixel centre on an edge
//   belongs to the face. The nearest face wins (largest interpolated 1/zc); ties go to the lowest
//   face index.
// - Gouraud shading: per-vertex normals are the sums of the adjacent faces' unnormalised normals;
//   each vertex gets albedo * (ambient + diffuse * sum_l I_l |n.l|) + specular * sum_l I_l
//   max(r_l.v, 0)^shininess, with r_l the reflection of l about the normal turned towards the
//   light (two-sided: CAD meshes have inconsistent winding), clamped to [0, 1] and interpolated
//   linearly in screen space. Uncovered pixels take `background`.
// - Each output pixel is the mean of its supersample x supersample block.
void render_mesh_views_cpu(const float* vertices, const std::int32_t* faces,
                           const float* elevations_deg, const float* azimuths_deg,
                           const float* lights, float* out, std::int64_t P, std::int64_t F,
                           std::int64_t N, std::int64_t M, std::int64_t L,
                           std::int64_t image_size, std::int64_t supersample, double ambient,
                           double diffuse, double specular, double shininess, double albedo,
                           double fov_deg, double distance, double background);

// Faces with a vertex nearer than this to the camera plane (world units) are not drawn.
constexpr double kNearPlane = 1e-3;

}  // namespace pyskick
